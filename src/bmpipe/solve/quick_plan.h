// A plan in milliseconds, without candidates or a search: what the search screens
// configurations with, and what the planner returns when a limit stopped it before any plan.
// Every layer on one recomputation option (the first on layers that have fewer), stages cut where
// the cumulative compute crosses equal shares; for each option, simulated; the fastest that fits.
#pragma once

#include <optional>

#include "bmpipe/core/deadline.h"
#include "bmpipe/problem/plan.h"
#include "bmpipe/problem/problem.h"
#include "bmpipe/schedule/schedule.h"
#include "bmpipe/solve/candidates.h"

namespace bmpipe {

struct QuickPlan {
  Plan plan;
  TimeNs iteration_ns = 0;  // simulated
};

// Nullopt when no such plan fits. With `space`, only plans it contains (a framework's settings,
// candidates.h) are tried. The first plan tried is always simulated; the others only while
// `deadline` has not passed (one simulation each, O(stages x micro-batches)). With
// `simulation_s`, it is set to the seconds the slowest simulation took (what re-scoring a plan of
// this problem costs; 0 when none was tried).
std::optional<QuickPlan> FindQuickPlan(const Problem& problem, const Schedule& schedule,
                                       const Deadline& deadline = Deadline::Never(), const StageSpace* space = nullptr,
                                       double* simulation_s = nullptr);

}  // namespace bmpipe

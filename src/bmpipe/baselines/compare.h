// bmpipe's planner and every baseline on one problem, each plan judged by the same simulator:
// what `bmpipe compare` prints.
#pragma once

#include <string>
#include <vector>

#include "bmpipe/baselines/baselines.h"
#include "bmpipe/core/deadline.h"
#include "bmpipe/core/progress.h"
#include "bmpipe/sim/simulator.h"
#include "bmpipe/frameworks/settings.h"

namespace bmpipe {

struct CompareRow {
  std::string name;  // "bmpipe" or a baseline's name
  bool applicable = true;
  std::string note;  // the configuration chosen, or why the planner does not apply
  bool has_plan = false;
  bool fits = false;
  Plan plan;
  SimResult sim;       // when has_plan
  std::string status;  // bmpipe only: "optimal" or "gap 1.23%"
  double seconds = 0;
};

struct CompareOptions {
  double time_limit_s = 60;  // for bmpipe, and for the baselines that run CBC
  // The framework bmpipe plans for (its row "bmpipe"); when not any, a row "bmpipe-any" gives the
  // per-layer plan too. Megatron's row is stock Megatron with the target's layer spec.
  TargetKind target = TargetKind::kAny;
  std::vector<BaselineKind> baselines = AllBaselines();
  Deadline deadline;      // the caller's (a stop flag, say), besides each planner's time limit
  ProgressSink progress;  // told which planner runs (and bmpipe's own progress)
};

// The first row is bmpipe's (then bmpipe-any's, when the target is not any).
Result<std::vector<CompareRow>> Compare(const Problem& problem, const CompareOptions& options);

// The row named "megatron" that has a plan that fits, or nullptr.
const CompareRow* MegatronRow(const std::vector<CompareRow>& rows);

}  // namespace bmpipe

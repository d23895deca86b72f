// bmpipe's exact solver for the formulation of formulation.h: best-first branch and bound.
//
// Bound: the linear relaxation (x in [0,1]) with the path cuts (e2), solved by CLP; after each
// solve the relaxation's fractional durations are timed and the critical path, if longer than
// T, becomes a new cut (cuts are valid everywhere and shared by all nodes). Any T so obtained is
// a lower bound, whether or not the cut loop has converged. (The time-indexed rows (e1) instead
// give the bound in one solve, but each solve is slower: 3.3 s against 0.32 s to prove the
// MindFormers demo optimal.)
// A second bound, exact over the integers for a family of paths (family_bound.h), is checked
// before the relaxation at the root, and at every node if at the root it was the stronger.
// Branching: first on a fractional stage boundary b_s (b_s <= floor | b_s >= ceil), which splits
// the pipeline into nearly independent halves; when all boundaries are integral, on a stage whose
// candidates are mixed, splitting its candidate index range (candidates are sorted by length).
// Incumbents: integral relaxation solutions, and at every node a rounding of the boundaries
// with, per stage, the compatible candidate the relaxation weights most. Every incumbent is
// timed by the simulator: the plan's value is the simulated iteration time.
#pragma once

#include <cstdint>
#include <string>

#include "bmpipe/schedule/schedule.h"
#include "bmpipe/solve/candidates.h"
#include "bmpipe/solve/planner.h"

namespace bmpipe {

// The most memory the search's open nodes and cuts may hold; beyond it the search stops as at a
// time limit (docs/planner.md, "Limits").
inline constexpr std::int64_t kBranchAndBoundMemoryBudgetBytes = std::int64_t{512} << 20;

// Stops at `deadline` (stopped_by then says `deadline_name`), at options.node_limit, or at the
// memory budget.
PlannerResult RunBranchAndBound(const Problem& problem, const Candidates& candidates, const Schedule& schedule,
                                const PlannerOptions& options, const Deadline& deadline,
                                const std::string& deadline_name);

}  // namespace bmpipe

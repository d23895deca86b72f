// The planner: the contiguous partition of the layers into p*v stages and one option per layer
// that minimize the simulated iteration time (docs/semantics.md) with every rank within memory.
#pragma once

#include <string>

#include "bmpipe/core/deadline.h"
#include "bmpipe/core/error.h"
#include "bmpipe/core/progress.h"
#include "bmpipe/problem/plan.h"
#include "bmpipe/problem/problem.h"
#include "bmpipe/solve/candidates.h"

namespace bmpipe {

enum class PlannerKind {
  kBranchAndBound,  // bmpipe's own: LP bounds with lazy critical-path cuts, boundary branching
  kCbc,             // the time-indexed integer program solved by CBC
  kBruteForce,      // every partition and option assignment, simulated (tiny problems only)
};

struct PlannerOptions {
  PlannerKind kind = PlannerKind::kBranchAndBound;
  // Bounds all of the run: candidate generation, the search, CBC. When it stops the run before any
  // plan, the quick plan (quick_plan.h) is returned if one fits (with the proven bound; without
  // a restricted `space` only).
  double time_limit_s = 60;
  // How a stop by time_limit_s is named (default "time limit T s"), when it is part of a larger one.
  std::string time_limit_name;
  // A deadline of the caller's (e.g. the search's time budget); the sooner of the two stops the run.
  Deadline deadline;
  long node_limit = -1;  // branch and bound only; -1: none
  // The candidates' budgets (candidates.h); lowered only by tests.
  std::int64_t candidate_memory_budget_bytes = kCandidateMemoryBudgetBytes;
  long max_candidates = kMaxCandidates;
  // The option mixes stages may take (a target's recomputation granularity); not with brute force.
  StageSpace space;
  bool write_lp = false;  // CBC only: return the integer program in LP format in PlannerResult::lp_text
  // Told each phase, and each better plan or bound while branch and bound runs (none: silent).
  ProgressSink progress;
  // Plans of this problem found elsewhere (a target's, a baseline's): the search starts from
  // them (first incumbents, and local search from their stage boundaries), and the result is
  // never slower than the fastest of them that fits and lies in `space` (the others are ignored).
  std::vector<Plan> seeds;
};

struct PlannerResult {
  ModelStatus status = ModelStatus::kNoSolution;
  Plan plan;                 // when status is kOptimal or kFeasible
  TimeNs iteration_ns = 0;   // the simulator's iteration time of `plan`
  double objective_ns = 0;   // the solver's own objective for `plan` (equals iteration_ns when exact)
  double bound_ns = 0;       // proven lower bound on the optimum
  double gap = 0;            // (iteration - bound) / iteration
  std::string solver;        // "bmpipe-bnb", "cbc", "brute-force"
  std::string stopped_by;    // the limit that stopped the search, if any
  double seconds = 0;
  long nodes = 0;
  long lp_solves = 0;
  long cuts = 0;
  long candidates = 0;
  std::string lp_text;  // with PlannerOptions::write_lp
};

// Plans `problem`. The quick plan (quick_plan.h) comes first, within a tenth of the time, so that a
// run any limit stops still has a plan; a plan the search finds replaces it unless it is slower.
// Fails only on input the planner cannot take (e.g. brute force on a large
// problem), on TooLarge when the candidates exceed their memory budget (candidates.h) and no quick
// plan fits, or on an internal error; "no plan fits" and time limits are results.
Result<PlannerResult> PlanPipeline(const Problem& problem, const PlannerOptions& options);

// What the plan file says about the planner run that found `r.plan` (plan.h, SolverInfo).
SolverInfo SolverInfoOf(const PlannerResult& r);

// Relative tolerance under which a bound proves a plan optimal.
inline constexpr double kOptimalityTolerance = 1e-7;

}  // namespace bmpipe

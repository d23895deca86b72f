// The outcome vocabulary, in two levels as HiGHS splits them: whether a call worked is its Status
// or Result (error.h: bad input, a file, too large, a bug), and what happened to the model it
// solved is a ModelStatus. A solve that a limit stopped, or whose model has no solution, is a
// result, not an error.
#pragma once

#include <string_view>

namespace bmpipe {

// What happened to a model: a planning problem (the planner, a target's space, a baseline's
// integer program) or a linear relaxation.
enum class ModelStatus {
  kOptimal,     // proven optimal (within the solver's tolerance)
  kFeasible,    // a solution, but a limit stopped the proof: see the bound and the gap
  kInfeasible,  // proven: no solution (no plan fits in memory)
  kNoSolution,  // a limit stopped the search before any solution was found
};
// "optimal", "feasible", "infeasible", "no plan found" (the plan file's and the reports' words).
std::string_view ModelStatusName(ModelStatus status);
// Optimal or feasible: there is a solution.
inline bool HasSolution(ModelStatus status) { return status == ModelStatus::kOptimal || status == ModelStatus::kFeasible; }

// Why long work stopped before it finished, when it did.
enum class StopReason {
  kNone,      // it finished
  kDeadline,  // the time limit, or the caller's stop flag (Ctrl-C)
  kBudget,    // a memory budget or a count limit
};

}  // namespace bmpipe

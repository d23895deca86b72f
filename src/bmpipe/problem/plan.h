// A plan: a contiguous partition of the layers into p*v stages and one option per layer, plus
// the per-stage and per-rank costs that follow from it (docs/semantics.md).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "bmpipe/core/error.h"
#include "bmpipe/core/outcome.h"
#include "bmpipe/problem/problem.h"

namespace bmpipe {

struct Plan {
  // Stage s holds layers [stage_begin[s], stage_begin[s+1]); size stages+1, first 0, last N.
  std::vector<LayerIdx> stage_begin;
  // The chosen option of every layer (index into Layer::options).
  std::vector<OptionIdx> option;

  int num_stages() const { return static_cast<int>(stage_begin.size()) - 1; }
  LayerIdx begin(StageIdx s) const { return stage_begin[s]; }
  LayerIdx end(StageIdx s) const { return stage_begin[s + 1]; }
  bool operator==(const Plan& other) const { return stage_begin == other.stage_begin && option == other.option; }
};

// What produced a plan and what was proven about it.

struct SolverInfo {
  SolverInfo() = default;
  SolverInfo(std::string solver_name, ModelStatus solver_status, double solver_seconds)
      : name(std::move(solver_name)), status(solver_status), seconds(solver_seconds) {}

  std::string name;
  ModelStatus status = ModelStatus::kFeasible;
  double seconds = 0;
  // What a planner proved; absent (negative or empty) for plans it did not make.
  double gap = -1;           // (iteration - bound) / iteration
  double bound_s = -1;       // proven lower bound on the optimal iteration time
  double objective_s = -1;   // the solver's own objective for the plan
  std::string stopped_by;    // the limit that stopped the search
};

// Checks that `plan` has p*v non-empty contiguous stages covering every layer in order and a
// valid option for every layer.
Status ValidatePlan(const Problem& problem, const Plan& plan);

// Per micro-batch costs of one stage: sums over its layers; the transient is their maximum.
struct StageCost {
  TimeNs forward_ns = 0;
  TimeNs backward_ns = 0;   // includes recompute_ns and weight_grad_ns
  TimeNs recompute_ns = 0;
  Bytes saved_bytes = 0;
  Bytes transient_bytes = 0;
  TimeNs p2p_out_ns = 0;    // p2p time of the stage's output: that of its last layer
  TimeNs weight_grad_ns = 0;    // the part of backward_ns that W runs when the schedule splits the backward
  Bytes weight_grad_bytes = 0;  // held from B to W when the schedule splits the backward
  // The parts of forward_ns and of backward_ns (outside weight_grad_ns) an overlapped pair hides
  // under its partner's compute (LayerOption::forward_comm_ns, backward_comm_ns).
  TimeNs forward_comm_ns = 0;
  TimeNs backward_comm_ns = 0;
};

// Per-rank costs that do not depend on micro-batches.
struct RankCost {
  Bytes static_bytes = 0;  // its layers' static bytes + the problem's reserved bytes
  TimeNs update_ns = 0;    // once-per-iteration work after its last backward
};

StageCost ComputeStageCost(const Problem& problem, const Plan& plan, StageIdx s);
std::vector<StageCost> ComputeStageCosts(const Problem& problem, const Plan& plan);
std::vector<RankCost> ComputeRankCosts(const Problem& problem, const Plan& plan);

// Layers split as evenly as possible (the first N mod S stages get one more) and option 0
// everywhere. For examples and tests; requires N >= stages.
Plan EvenPlan(const Problem& problem);

// stage_begin without its leading 0: end[s] is the first layer after stage s.
std::vector<LayerIdx> StageEnds(const Plan& plan);

// "embedding, decoder x5, head": consecutive equal names collapsed.
std::string DescribeLayerNames(const Problem& problem, LayerIdx begin, LayerIdx end);
// "none x2, selective x4": option counts in order of first appearance.
std::string DescribeOptionMix(const Problem& problem, const Plan& plan, StageIdx s);

}  // namespace bmpipe

// The planners users would otherwise pick, each re-implemented faithfully and producing a Plan for
// the same Problem, so that one simulator (docs/semantics.md) judges them all against bmpipe:
//  - megatron: the best stock Megatron-LM configuration for the layer spec: any split its
//    --pipeline-model-parallel-layout expresses (even, uneven, interleaved, stages holding only the
//    embedding or the loss) with any of its global recomputation settings (none; selective with
//    every set of --recompute-modules the spec honours; full uniform; full block N), found
//    exactly by bmpipe's planner within that space (frameworks/settings.h).
//  - pipedream: PipeDream's planner: the contiguous partition minimizing the slowest stage under
//    memory, without recomputation.
//  - merak: a time-balanced partition plus Merak's stage-aware recomputation rule (stage i < S-1
//    checkpoints a fraction max(0, 1 - (1-r0)(S-1)/(S-1-i)) of its layers, the last stage none),
//    with the best r0 that fits.
//  - adapipe: AdaPipe's two-level dynamic program: per stage and layer range the fastest
//    recomputation mix that fits (a knapsack over the layers' options), inside a partition DP
//    minimizing sum + (m-1) max of stage times.
//  - mist: Mist's inter-stage MILP over per-stage Pareto candidates (layer counts within the
//    average +- 2, checkpointed layers), objective (m-1) max + sum + max delta, solved by CBC.
//  - mindformers-tool: the MindFormers pipeline-balance tool's ILP (its default -O 1): integer
//    counts of each recompute type per stage (and chunk), min-max stage time, memory with its
//    in-flight counts, solved by CBC.
// Where a planner cannot express the problem (interleaving for the 1F1B-only ones, unequal
// decoder layers for the ones that assume one layer type), it says so instead of guessing.
#pragma once

#include <string>
#include <vector>

#include "bmpipe/core/deadline.h"
#include "bmpipe/core/error.h"
#include "bmpipe/problem/plan.h"
#include "bmpipe/problem/problem.h"
#include "bmpipe/frameworks/framework.h"

namespace bmpipe {

enum class BaselineKind { kMegatron, kPipeDream, kMerak, kAdaPipe, kMist, kMindFormersTool };

// In the order `compare` prints them.
std::vector<BaselineKind> AllBaselines();
std::string BaselineName(BaselineKind kind);  // "megatron", "pipedream", ...

struct BaselineOptions {
  double time_limit_s = 60;  // for each baseline: its dynamic programs, enumerations and CBC
  TargetKind megatron_target = TargetKind::kMegatron;  // the layer spec stock Megatron runs with
  Deadline deadline;  // the caller's (a stop flag, say); the sooner of it and the time limit stops each
};

struct BaselineResult {
  std::string name;
  bool applicable = true;
  std::string not_applicable;  // why, when not applicable
  bool has_plan = false;       // a plan, which may still not fit (then the least-over one)
  bool fits = false;           // the plan fits in memory (by the simulator)
  Plan plan;
  std::string config;          // the configuration it chose, in the planner's own terms
  std::string stopped_by;      // the limit that stopped it before it had tried everything, if any
  double seconds = 0;
};

BaselineResult RunBaseline(BaselineKind kind, const Problem& problem, const BaselineOptions& options);

}  // namespace bmpipe

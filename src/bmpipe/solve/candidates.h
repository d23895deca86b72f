// Per-stage candidates for the planner: every way a stage can hold a contiguous block of layers
// with an option per layer, aggregated and pruned.
//
// Layers are grouped into runs of identical consecutive layers (same costs and options). A
// stage's block is either inside one run (k layers; its position is free within the run) or
// spans runs (the last k_g layers of run g, all runs in between, the first k_h layers of run h;
// its position is fixed). Only the count of each option per run part matters, so a candidate is
// a block shape plus an option mix, and the mixes of a shape are pruned to the Pareto front of
// (forward, backward, saved, transient): a mix that is no better in any of them is never needed,
// because iteration time and memory are monotone in all four.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bmpipe/core/deadline.h"
#include "bmpipe/core/outcome.h"
#include "bmpipe/problem/plan.h"
#include "bmpipe/problem/problem.h"
#include "bmpipe/schedule/schedule.h"

namespace bmpipe {

// Maximal blocks of consecutive identical layers.
struct LayerRun {
  LayerIdx begin;
  LayerIdx end;
  int size() const { return end - begin; }
};
std::vector<LayerRun> FindRuns(const Problem& problem);

// The activations a rank holds at one moment of its op order: in_flight[c] micro-batches whose
// saved activations its chunk c keeps and held[c] whose W is still to run (split backwards), while
// an op of chunk transient_chunk runs. Its memory is then static + reserved + the sum over chunks
// of ChunkBytes.
struct MemoryRow {
  std::vector<int> in_flight;  // per chunk
  std::vector<int> held;       // per chunk
  int transient_chunk = 0;

  // What chunk c's stage adds at this moment to its static bytes.
  Bytes ChunkBytes(int c, Bytes saved, Bytes weight_grad, Bytes transient) const {
    return in_flight[c] * saved + held[c] * weight_grad + (transient_chunk == c ? transient : 0);
  }
  Bytes ChunkBytes(int c, const StageCost& cost) const {
    return ChunkBytes(c, cost.saved_bytes, cost.weight_grad_bytes, cost.transient_bytes);
  }
};
// Per rank, the moments that can be the peak (the others are dominated), from the op order.
std::vector<std::vector<MemoryRow>> PeakMemoryRows(const Schedule& schedule);

struct RunPart {
  int run;
  int count;
  std::vector<int> option_count;  // per option of the run's layers
};

struct Candidate {
  int length = 0;
  LayerIdx start_min = 0;  // the block may start at any layer in [start_min, start_max]
  LayerIdx start_max = 0;
  std::vector<RunPart> parts;  // in layer order
  StageCost cost;              // per micro-batch, as ComputeStageCost would give
  Bytes static_bytes = 0;
  TimeNs update_ns = 0;
};

// The option mixes a stage may take: a framework's recomputation granularity (target/target.h).
// The default lets every layer take any of its options.
struct StageSpace {
  // When not empty: each family allows, per layer, a set of options (bit o: option o), and a stage
  // takes the options of all its layers from one family.
  std::vector<std::vector<std::uint16_t>> families;
  // Megatron's full recomputation by block: when >= 0, a stage's first `block` layers that have a
  // block option (block_option[l] >= 0) take it, and every other layer the first option the first
  // family allows it.
  int block = -1;
  std::vector<OptionIdx> block_option;
  // When not empty: the layers of which every stage must hold at least one (the decoder layers).
  std::vector<bool> needs_one_of;
  // When not empty: per layer and option, its rank in the framework's order within a stage (-1:
  // unordered); a stage's layers take non-decreasing ranks in layer order. Candidate generation
  // does not see it (it places options freely within runs of identical layers): only Contains.
  std::vector<std::vector<std::int8_t>> order;

  bool unrestricted() const { return families.empty() && block < 0 && needs_one_of.empty() && order.empty(); }
  // The option every layer takes when it has one choice: the first its first family allows.
  OptionIdx FirstAllowed(LayerIdx l) const;
  // Whether `plan` lies in the space.
  bool Contains(const Plan& plan) const;
  // The options the space fixes on `plan`'s partition: the block rule's, else each layer's first
  // allowed option (the space's plan when each layer has one choice).
  void AssignFixed(Plan& plan) const;
};

// The most memory candidate generation may hold: the Pareto fronts of runs, the mixes of block
// shapes and the candidates themselves (estimated from their sizes), and the most candidates in all
// (each is a column of the planner's linear program and costs about as much again there). Beyond
// either, generation stops (docs/planner.md, "Limits").
inline constexpr std::int64_t kCandidateMemoryBudgetBytes = std::int64_t{1} << 30;
inline constexpr long kMaxCandidates = 1'000'000;

struct CandidateLimits {
  Deadline deadline;
  const StageSpace* space = nullptr;  // nullptr: unrestricted
  std::int64_t memory_budget_bytes = kCandidateMemoryBudgetBytes;
  long max_candidates = kMaxCandidates;
  // > 0: the iteration time of a plan already known (the quick plan's, a seed's). A block whose
  // own work keeps its rank busy at least that long (micro-batches x its fastest forward and
  // backward, less what overlapped pairs can hide) is left out: no plan with it is faster.
  TimeNs time_cap_ns = 0;
};

struct Candidates {
  // When not kNone the candidates are incomplete: plans made of them are real plans, but they
  // prove nothing (no bound, no infeasibility). `stop_reason` then says which size was too large.
  StopReason stop = StopReason::kNone;
  std::string stop_reason;
  std::vector<LayerRun> runs;
  std::vector<std::vector<MemoryRow>> memory_rows;  // per rank
  std::vector<std::vector<Candidate>> per_stage;
  // True when every candidate's memory was checked exactly (one chunk per rank): the planner
  // then needs no memory rows.
  bool memory_exact = true;
};

// The least work one layer adds to its rank per micro-batch, over its options: forward plus
// backward with recomputation, compute only (an overlapped pair hides the communication).
TimeNs LeastLayerWork(const Problem& problem, LayerIdx l);
// The micro-batches each copy of a stage runs (the mirror placement has two copies).
int MicroBatchesPerCopy(const Pipeline& pipeline);
// The first option of `layer` no slower than every other in forward and in backward with
// recomputation; -1 when none is.
OptionIdx FastestOption(const Layer& layer);

// All candidates of every stage that can fit in memory on their own. Exact: every feasible plan
// is made of one candidate per stage, up to replacing a stage's mix by one that dominates it;
// unless `limits` stopped generation (see Candidates::stop).
Candidates GenerateCandidates(const Problem& problem, const Schedule& schedule, const CandidateLimits& limits = {});

// Layer options of a candidate placed at `start`, in layer order: within each run part the
// options are given in the order of the layer's option list (lowest index first).
void AssignOptions(const Candidate& candidate, LayerIdx start, Plan& plan);

// Peak memory of rank r when stage s uses stage_candidates[s] (a vector over all stages; only
// the rank's stages are read), by the memory rows.
Bytes RankPeakMemory(const Problem& problem, const Candidates& candidates, RankIdx r,
                     const std::vector<const Candidate*>& stage_candidates);

}  // namespace bmpipe

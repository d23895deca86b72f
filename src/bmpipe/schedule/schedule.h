// Per-rank op orders of the pipeline schedules, exactly as docs/semantics.md defines them. A schedule
// is data: the simulator is generic and runs any order it is given.
#pragma once

#include <cstdint>
#include <vector>

#include "bmpipe/problem/problem.h"

namespace bmpipe {

enum class OpKind : std::uint8_t { kForward, kBackward };

struct Op {
  StageIdx stage;
  MicroBatchIdx micro_batch;
  OpKind kind;
};

struct Schedule {
  Pipeline pipeline;
  std::vector<std::vector<Op>> rank_ops;  // rank_ops[r]: the ops rank r runs, in order
};

// The op an op waits for (docs/semantics.md): F(s,j) waits for F(s-1,j); B(S-1,j) for F(S-1,j); B(s,j)
// for B(s+1,j). p2p time applies when the two stages sit on different ranks; it is the p2p time
// of the output of stage `boundary` (the upstream one of the two).
struct Dependency {
  bool exists = false;  // false for F(0, j)
  Op op{0, 0, OpKind::kForward};
  StageIdx boundary = 0;
  bool crosses_ranks = false;
};
// Inline: the simulator asks for every op it times, and the planner times millions of ops.
inline Dependency DependencyOf(const Pipeline& p, const Op& op) {
  const StageIdx s = op.stage;
  const MicroBatchIdx j = op.micro_batch;
  if (op.kind == OpKind::kForward) {
    if (s == 0) return {};
    return {true, {s - 1, j, OpKind::kForward}, s - 1, p.RankOf(s - 1) != p.RankOf(s)};
  }
  if (s == p.stages() - 1) return {true, {s, j, OpKind::kForward}, s, false};
  return {true, {s + 1, j, OpKind::kBackward}, s, p.RankOf(s + 1) != p.RankOf(s)};
}

// Number of forwards rank r runs before its first backward.
int WarmupForwards(const Pipeline& pipeline, RankIdx r);

// Builds the op order for a validated pipeline (see ValidatePipeline):
// - GPipe: all m forwards, then all m backwards in order 0..m-1;
// - 1F1B: w = min(p-r-1, m) forwards, m-w (forward, backward) pairs, w backwards;
// - interleaved 1F1B: Megatron's order over m*v chunk-micro-batches, the k-th forward on chunk
//   (k div p) mod v, the k-th backward on chunk v-1-((k div p) mod v), both of micro-batch
//   (k div pv)*p + k mod p; warm-up min(2(p-r-1) + (v-1)p, m*v).
Schedule BuildSchedule(const Pipeline& pipeline);

}  // namespace bmpipe

// How a pipeline executes, as docs/semantics.md defines it: the op order of every rank and the
// op graph over it (each op's dependencies and dependents, with the p2p boundary each crosses),
// built once per pipeline and read by everything that times, bounds or exports a schedule. The
// simulator is generic: it runs any order it is given.
#pragma once

#include <cstdint>
#include <vector>

#include "bmpipe/schedule/pipeline.h"

namespace bmpipe {

// F: a stage's forward of one micro-batch. B: its backward; when the schedule splits the backward
// (ScheduleTraits::split_backward) only the input-gradient part, and W the weight-gradient part.
enum class OpKind : std::uint8_t { kForward, kBackward, kWeightGrad };

struct Op {
  StageIdx stage;
  MicroBatchIdx micro_batch;
  OpKind kind;
  // Runs in one action with the op before it on its rank (docs/semantics.md, "Actions"): the
  // action starts when all its ops' dependencies are met and its ops run back to back; what
  // waits for any of them waits for the action's end. A full backward is B joined by its W; an
  // overlapped forward and backward is F joined by B and W.
  bool joined = false;
};

// What an op does to its stage's memory, in units of the stage's per-micro-batch bytes: `saved`
// (kept from the forward for the backward) and `held` (what a deferred W still needs once B
// has run: the inputs of the weight GEMMs and the gradients of their outputs).
struct MemoryEffect {
  int saved = 0;
  int held = 0;
};
// F saves; B frees what F saved, and with a split backward holds what its W needs; W frees that.
inline constexpr MemoryEffect EffectOf(OpKind kind, bool split_backward) {
  switch (kind) {
    case OpKind::kForward:
      return {1, 0};
    case OpKind::kBackward:
      return {-1, split_backward ? 1 : 0};
    case OpKind::kWeightGrad:
      return {0, -1};
  }
  return {};
}

using OpId = std::int32_t;

// An edge of the op graph. p2p time applies when the two ops run on different ranks; it is the
// p2p time of the output of stage `boundary` (the upstream one of the two stages).
struct OpEdge {
  OpId op = 0;  // the op at the other end
  StageIdx boundary = 0;
  bool crosses_ranks = false;
};

// At most two edges (every op kind has at most two dependencies and two dependents), by value.
struct OpEdges {
  int count = 0;
  OpEdge edge[2];
  const OpEdge* begin() const { return edge; }
  const OpEdge* end() const { return edge + count; }
};

class Schedule {
 public:
  // Builds the order and the graph for a validated pipeline (ValidatePipeline):
  // - GPipe: all m forwards, then all m backwards in order 0..m-1;
  // - the 1F1B family (ScheduleTraits::order kOneFOneB): w warm-up forwards, then (forward,
  //   backward) pairs, then the w backwards left, the k-th forward and backward from Megatron's
  //   order table over m*v chunk-micro-batches in groups of N micro-batches
  //   (Pipeline::MicroBatchGroup): per group, every chunk in turn with the group's micro-batches;
  //   the k-th backward is the k-th entry with chunk v-1-c. w = min((v-1)N + h(p-r-1), m*v), h
  //   the table's warmup_per_rank: 1 for 1F1B, ZB-H1 and interleaved ZB, 2 for interleaved 1F1B
  //   and ZB-H2;
  // - with a split backward (ZB-H1, ZB-H2, interleaved ZB): that order with the W of the k-th
  //   backward right after backward k + l*r (l the table's w_lag_per_rank: 1, or 2 for ZB-H2),
  //   the rest after the last backward: the deferred W's fill the cool-down;
  // - ZB-V: torch's ZBVZeroBubble order over the V placement (schedule.cc, ZeroBubbleVOrder).
  explicit Schedule(const Pipeline& pipeline);
  // Any other order over the same ops: every op of the pipeline's schedule kind exactly once, on
  // the rank its stage sits on (an error otherwise). It may deadlock; the simulator says so.
  static Result<Schedule> FromOrders(const Pipeline& pipeline, std::vector<std::vector<Op>> rank_ops);

  const Pipeline& pipeline() const { return pipeline_; }
  // rank_ops[r]: the ops rank r runs, in order.
  const std::vector<std::vector<Op>>& rank_ops() const { return rank_ops_; }
  const std::vector<Op>& ops_of(RankIdx r) const { return rank_ops_[r]; }

  // Ops are numbered kind-major, then stage, then micro-batch.
  OpId IdOf(const Op& op) const {
    return (static_cast<OpId>(op.kind) * stages_ + op.stage) * pipeline_.micro_batches + op.micro_batch;
  }
  Op OpOf(OpId id) const {
    const int m = pipeline_.micro_batches, per_kind = stages_ * m;
    return Op{(id % per_kind) / m, id % m, static_cast<OpKind>(id / per_kind)};
  }
  OpId IdAt(RankIdx r, std::size_t position) const { return IdOf(rank_ops_[r][position]); }
  std::int64_t num_op_ids() const {
    return static_cast<std::int64_t>(kinds_) * stages_ * pipeline_.micro_batches;
  }
  RankIdx RankOfOp(OpId id) const { return RankOf(OpOf(id)); }
  // The rank that runs op (Pipeline::RankOf of its stage and copy).
  RankIdx RankOf(const Op& op) const {
    return rank_of_stage_[op.stage + (mirrored_ && 2 * op.micro_batch >= pipeline_.micro_batches ? stages_ : 0)];
  }
  std::size_t PositionOf(OpId id) const { return position_[id]; }

  // The op graph (docs/semantics.md): F(s,j) waits for F(s-1,j); B(S-1,j) for F(S-1,j); B(s,j) for
  // B(s+1,j); W(s,j) for B(s,j). Computed from the op in a few instructions rather than stored:
  // the simulator reads one per op, and holding them would cost more than deriving them.
  OpEdges Dependencies(const Op& op) const { return has_actions_ ? ActionDependencies(op) : OpDependencies(op); }
  // The ops that wait for `op`: Dependencies read the other way.
  OpEdges Dependents(const Op& op) const { return has_actions_ ? ActionDependents(op) : OpDependents(op); }
  // Whether some op runs joined to the one before it (Op::joined).
  bool has_actions() const { return has_actions_; }
  // The op graph of single ops, before actions join them: what Dependencies reads for each op of
  // an action (the simulator's inner loop derives an action's edges from these and the order).
  OpEdges OpDependencies(const Op& op) const {
    const StageIdx s = op.stage;
    const MicroBatchIdx j = op.micro_batch;
    switch (op.kind) {
      case OpKind::kForward:
        if (s == 0) return {};
        return Edge({s - 1, j, OpKind::kForward}, s - 1, s);
      case OpKind::kBackward:
        if (s == stages_ - 1) return Edge({s, j, OpKind::kForward}, s, s);
        return Edge({s + 1, j, OpKind::kBackward}, s, s);
      case OpKind::kWeightGrad:
        return Edge({s, j, OpKind::kBackward}, s, s);
    }
    return {};
  }

  MemoryEffect EffectOf(OpKind kind) const { return bmpipe::EffectOf(kind, pipeline_.SplitBackward()); }
  // The bubble of the schedule with equal stages, no p2p and B = W = F (for unsplit schedules
  // B = 2F): idle time over useful time on every rank (ScheduleTraits::ideal_bubble_divisor).
  double IdealBubble() const;

 private:
  Schedule(const Pipeline& pipeline, std::vector<std::vector<Op>> rank_ops);
  OpEdges OpDependents(const Op& op) const {
    const StageIdx s = op.stage;
    const MicroBatchIdx j = op.micro_batch;
    OpEdges out;
    switch (op.kind) {
      case OpKind::kForward:
        if (s + 1 < stages_) return Edge({s + 1, j, OpKind::kForward}, s, s);
        return Edge({s, j, OpKind::kBackward}, s, s);
      case OpKind::kBackward:
        if (s > 0) out = Edge({s - 1, j, OpKind::kBackward}, s - 1, s);
        if (pipeline_.SplitBackward()) out.edge[out.count++] = Edge({s, j, OpKind::kWeightGrad}, s, s).edge[0];
        return out;
      case OpKind::kWeightGrad:
        return {};
    }
    return {};
  }
  // With actions: the first op of an action waits for every dependency of its ops outside the
  // action, each read as the end of the action holding it; the action's other ops wait for
  // nothing but the rank. The last op of an action is waited for by every dependent of its ops
  // outside it, each read as the first op of its action; the others by none.
  OpEdges ActionDependencies(const Op& op) const;
  OpEdges ActionDependents(const Op& op) const;
  // The one edge between an op of stage `stage` and `other`, carrying stage `boundary`'s output.
  OpEdges Edge(const Op& other, StageIdx boundary, StageIdx stage) const {
    OpEdges e;
    e.count = 1;
    e.edge[0] = {IdOf(other), boundary, RankOf(other) != RankOf({stage, other.micro_batch, other.kind})};
    return e;
  }

  Pipeline pipeline_;
  int kinds_ = 2;
  std::vector<std::vector<Op>> rank_ops_;
  int stages_ = 1;                       // Pipeline::stages, looked up rather than recomputed
  bool mirrored_ = false;                // two copies of every stage (Pipeline::Copies)
  std::vector<RankIdx> rank_of_stage_;   // Pipeline::RankOf per copy and stage, looked up rather than divided
  std::vector<std::uint32_t> position_;  // per OpId: where it runs in its rank's order
  bool has_actions_ = false;
  std::vector<OpId> action_first_, action_last_;  // per OpId, with actions: its action's first and last op
};

// Number of forwards rank r runs before its first backward.
int WarmupForwards(const Pipeline& pipeline, RankIdx r);

}  // namespace bmpipe

#include "bmpipe/schedule/schedule.h"

#include <algorithm>

namespace bmpipe {
namespace {

// Megatron's interleaved order as a table over k = 0..m*v-1: entry k is the chunk (in order) and
// micro-batch of rank r's k-th forward, and, with the chunk reversed, of its k-th backward. Per
// group of N micro-batches (the last group takes what is left) it lists every chunk in turn with
// the group's micro-batches. With v = 1 entry k is micro-batch k.
struct OrderTable {
  std::vector<int> chunk, micro_batch;
};

OrderTable MegatronTable(const Pipeline& p) {
  OrderTable t;
  const std::size_t total = static_cast<std::size_t>(p.micro_batches) * p.chunks;
  t.chunk.reserve(total);
  t.micro_batch.reserve(total);
  const int n = p.chunks == 1 ? p.micro_batches : p.MicroBatchGroup();
  for (int first = 0; first < p.micro_batches; first += n) {
    // The group that reaches the last micro-batch takes every remaining one (Megatron's).
    const int size = first + n >= p.micro_batches ? p.micro_batches - first : n;
    for (int c = 0; c < p.chunks; ++c) {
      for (int j = first; j < first + size; ++j) {
        t.chunk.push_back(c);
        t.micro_batch.push_back(j);
      }
    }
  }
  return t;
}

// The 1F1B family's order on rank r: warm-up forwards, (forward, backward) pairs, cool-down
// backwards, the k-th of each from the table.
std::vector<Op> OneFOneBOrder(const Pipeline& p, const OrderTable& table, RankIdx r) {
  const int total = p.micro_batches * p.chunks;
  std::vector<Op> ops(2 * static_cast<std::size_t>(total));
  const int warmup = WarmupForwards(p, r);
  std::vector<StageIdx> forward_stage(p.chunks), backward_stage(p.chunks);
  for (int c = 0; c < p.chunks; ++c) {
    forward_stage[c] = p.StageAt(r, c);
    backward_stage[c] = p.StageAt(r, p.chunks - 1 - c);
  }
  auto forward = [&](int k) { return Op{forward_stage[table.chunk[k]], table.micro_batch[k], OpKind::kForward}; };
  auto backward = [&](int k) { return Op{backward_stage[table.chunk[k]], table.micro_batch[k], OpKind::kBackward}; };
  std::size_t at = 0;
  for (int k = 0; k < warmup; ++k) ops[at++] = forward(k);
  for (int k = 0; k < total - warmup; ++k) {
    ops[at++] = forward(warmup + k);
    ops[at++] = backward(k);
  }
  for (int k = total - warmup; k < total; ++k) ops[at++] = backward(k);
  return ops;
}

// ZB-H1 on rank r: 1F1B's order with W(j) right after B(j + r), and the W's left over after the
// last B. The last ranks defer their W's most, so that their B's, which every earlier rank waits
// for, run first; the deferred W's fill the cool-down. Each rank then holds p micro-batches'
// activations at most, saved or waiting for W, as rank 0 does under 1F1B.
std::vector<Op> ZeroBubbleH1Order(const Pipeline& p, const OrderTable& table, RankIdx r) {
  std::vector<Op> ops;
  ops.reserve(3 * static_cast<std::size_t>(p.micro_batches));
  int next_w = 0;
  for (const Op& op : OneFOneBOrder(p, table, r)) {
    ops.push_back(op);
    if (op.kind == OpKind::kBackward && op.micro_batch >= r) ops.push_back({op.stage, next_w++, OpKind::kWeightGrad});
  }
  while (next_w < p.micro_batches) ops.push_back({p.StageAt(r, 0), next_w++, OpKind::kWeightGrad});
  return ops;
}

std::vector<Op> OrderOf(const Pipeline& p, const OrderTable& table, RankIdx r) {
  switch (p.schedule) {
    case ScheduleKind::kGPipe: {
      std::vector<Op> ops;
      ops.reserve(2 * static_cast<std::size_t>(p.micro_batches));
      for (int j = 0; j < p.micro_batches; ++j) ops.push_back({r, j, OpKind::kForward});
      for (int j = 0; j < p.micro_batches; ++j) ops.push_back({r, j, OpKind::kBackward});
      return ops;
    }
    case ScheduleKind::kOneFOneB:
    case ScheduleKind::kInterleavedOneFOneB:
      return OneFOneBOrder(p, table, r);
    case ScheduleKind::kZeroBubbleH1:
      return ZeroBubbleH1Order(p, table, r);
  }
  return {};
}

}  // namespace

int WarmupForwards(const Pipeline& p, RankIdx r) {
  const int total = p.micro_batches * p.chunks;
  switch (p.schedule) {
    case ScheduleKind::kGPipe:
      return total;
    case ScheduleKind::kOneFOneB:
    case ScheduleKind::kZeroBubbleH1:
      return std::min(p.ranks - r - 1, total);
    case ScheduleKind::kInterleavedOneFOneB:
      return std::min(2 * (p.ranks - r - 1) + (p.chunks - 1) * p.MicroBatchGroup(), total);
  }
  return total;
}

namespace {

std::vector<std::vector<Op>> OrdersOf(const Pipeline& p) {
  const OrderTable table = p.schedule == ScheduleKind::kGPipe ? OrderTable{} : MegatronTable(p);
  std::vector<std::vector<Op>> orders(p.ranks);
  for (RankIdx r = 0; r < p.ranks; ++r) orders[r] = OrderOf(p, table, r);
  return orders;
}

}  // namespace

Schedule::Schedule(const Pipeline& p) : Schedule(p, OrdersOf(p)) {}

Result<Schedule> Schedule::FromOrders(const Pipeline& p, std::vector<std::vector<Op>> rank_ops) {
  if (static_cast<int>(rank_ops.size()) != p.ranks) return InternalError("an order per rank is needed");
  const int kinds = p.SplitBackward() ? 3 : 2;
  std::vector<char> seen(static_cast<std::size_t>(kinds) * p.stages() * p.micro_batches, 0);
  std::size_t count = 0;
  for (RankIdx r = 0; r < p.ranks; ++r) {
    for (const Op& op : rank_ops[r]) {
      if (op.stage < 0 || op.stage >= p.stages() || op.micro_batch < 0 || op.micro_batch >= p.micro_batches ||
          static_cast<int>(op.kind) >= kinds || p.RankOf(op.stage) != r) {
        return InternalError("an op of the order is not one of the pipeline's, or sits on another rank");
      }
      char& once = seen[(static_cast<std::size_t>(op.kind) * p.stages() + op.stage) * p.micro_batches + op.micro_batch];
      if (once++) return InternalError("an op appears twice in the order");
      ++count;
    }
  }
  if (count != seen.size()) return InternalError("the order leaves out ops of the pipeline");
  return Schedule(p, std::move(rank_ops));
}

Schedule::Schedule(const Pipeline& p, std::vector<std::vector<Op>> rank_ops)
    : pipeline_(p), kinds_(p.SplitBackward() ? 3 : 2), rank_ops_(std::move(rank_ops)) {
  for (StageIdx s = 0; s < p.stages(); ++s) rank_of_stage_.push_back(p.RankOf(s));
  position_.resize(static_cast<std::size_t>(num_op_ids()));
  for (RankIdx r = 0; r < p.ranks; ++r) {
    for (std::size_t i = 0; i < rank_ops_[r].size(); ++i) position_[IdOf(rank_ops_[r][i])] = static_cast<std::uint32_t>(i);
  }
}

double Schedule::IdealBubble() const {
  const Pipeline& p = pipeline_;
  const double bubble = static_cast<double>(p.ranks - 1) / (static_cast<double>(p.chunks) * p.micro_batches);
  // ZB-H1 with B = W = F: the cool-down waits only on B, a third of the work of an op triple.
  return p.schedule == ScheduleKind::kZeroBubbleH1 ? bubble / 3 : bubble;
}

}  // namespace bmpipe

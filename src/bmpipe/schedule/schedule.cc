#include "bmpipe/schedule/schedule.h"

#include <algorithm>
#include <cassert>

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
  // Megatron's combined 1F1B (interleaved, overlapped): each steady forward and the backward
  // after it run as one action.
  const bool combined = p.overlap && !p.SplitBackward();
  for (int k = 0; k < total - warmup; ++k) {
    ops[at++] = forward(warmup + k);
    ops[at] = backward(k);
    ops[at++].joined = combined;
  }
  for (int k = total - warmup; k < total; ++k) ops[at++] = backward(k);
  return ops;
}

// The 1F1B family's order with the backward split (ZB-H1, ZB-H2, interleaved ZB) on rank r: the
// unsplit order with the W of the k-th backward right after backward k + lag, lag =
// w_lag_per_rank * r, and the W's left over after the last backward, in order. The last ranks
// defer their W's most, so that their B's, which every earlier rank waits for, run first; the
// deferred W's fill the cool-down.
std::vector<Op> SplitBackwardOrder(const Pipeline& p, const OrderTable& table, RankIdx r) {
  std::vector<Op> ops;
  ops.reserve(3 * static_cast<std::size_t>(p.micro_batches) * p.chunks);
  const int lag = TraitsOf(p.schedule).w_lag_per_rank * r;
  std::vector<Op> backwards;  // in order; W(backwards[k]) follows backward k + lag
  backwards.reserve(static_cast<std::size_t>(p.micro_batches) * p.chunks);
  std::size_t next_w = 0;
  auto weight_grad = [&] {
    const Op& b = backwards[next_w++];
    ops.push_back({b.stage, b.micro_batch, OpKind::kWeightGrad});
  };
  for (const Op& op : OneFOneBOrder(p, table, r)) {
    ops.push_back(op);
    if (op.kind != OpKind::kBackward) continue;
    backwards.push_back(op);
    if (backwards.size() > static_cast<std::size_t>(lag)) weight_grad();
  }
  while (next_w < backwards.size()) weight_grad();
  return ops;
}

// ZB-V on rank r, which holds stage r (chunk 0, forwards downwards) and stage 2p-1-r (chunk 1,
// forwards back up): torch.distributed.pipelining's ZBVZeroBubble order. Warm-up: 2(p-r)-1
// chunk-0 forwards, then r (chunk-1, chunk-0) forward pairs, then p-r (chunk-1 F, B, W) triples;
// steady: (chunk-0 F, B, W, chunk-1 F, B, W) while forwards remain; cool-down: r (chunk-0 B,
// chunk-1 B) pairs, then (chunk-0 B, W) pairs, then the W's left over, chunk 1's first. The order
// is built for max(m, 2p-1) micro-batches and the ops of micro-batches past m are left out.
std::vector<Op> ZeroBubbleVOrder(const Pipeline& p, RankIdx r) {
  const int m = p.micro_batches, n = std::max(m, 2 * p.ranks - 1);
  const StageIdx s0 = p.StageAt(r, 0), s1 = p.StageAt(r, 1);
  std::vector<Op> ops;
  ops.reserve(6 * static_cast<std::size_t>(m));
  int f0 = 0, f1 = 0, b0 = 0, b1 = 0;
  auto add = [&](StageIdx s, int& count, OpKind kind) {
    if (count < m) ops.push_back({s, count, kind});
    ++count;
  };
  auto add_bw = [&](StageIdx s, int& count) {
    if (count < m) {
      ops.push_back({s, count, OpKind::kBackward});
      ops.push_back({s, count, OpKind::kWeightGrad});
    }
    ++count;
  };
  for (int k = 0; k < 2 * (p.ranks - r) - 1; ++k) add(s0, f0, OpKind::kForward);
  for (int k = 0; k < r; ++k) {
    add(s1, f1, OpKind::kForward);
    add(s0, f0, OpKind::kForward);
  }
  for (int k = 0; k < p.ranks - r; ++k) {
    add(s1, f1, OpKind::kForward);
    add_bw(s1, b1);
  }
  while (f1 < f0 || f0 < n) {
    if (f0 < n) add(s0, f0, OpKind::kForward);
    add_bw(s0, b0);
    add(s1, f1, OpKind::kForward);
    add_bw(s1, b1);
  }
  int w0 = b0, w1 = b1;
  for (int k = 0; k < r; ++k) {
    add(s0, b0, OpKind::kBackward);
    add(s1, b1, OpKind::kBackward);
  }
  for (int k = 0; k < p.ranks - r; ++k) {
    add(s0, b0, OpKind::kBackward);
    add(s0, w0, OpKind::kWeightGrad);
  }
  while (w1 < b1) add(s1, w1, OpKind::kWeightGrad);
  while (w0 < b0) add(s0, w0, OpKind::kWeightGrad);
  return ops;
}

// DeepSeek's DualPipe order on rank r (DualPipeV is the same order folded onto half the ranks).
// The order sees n ranks in a row, the rank at position h of them (h < n), and two chunks with n
// micro-batches each, chunk 0 the one whose micro-batches reach the rank first:
// - DualPipeV over the V placement: n = p ranks, h = r, chunk c is stage StageAt(r, c) over all
//   m micro-batches (torch.distributed.pipelining's ScheduleDualPipeV);
// - DualPipe over the mirror placement: n = p/2, h = min(r, p-1-r), chunk 0 the stage h of the
//   micro-batch half that enters at the rank's end of the pipeline (copy 0 for r < p/2), chunk 1
//   the stage p-1-h of the other half; m/2 micro-batches each (DeepSeek's DualPipe.step).
// Its actions are single ops, full backwards (B joined by its W) and overlapped pairs (a forward
// joined by the other chunk's full backward); a split B queues its W, which runs at the next "W"
// step. The eight steps:
//  1. 2(n-h-1) chunk-0 F;  2. h+1 (chunk-0 F, chunk-1 F);  3. n-h-1 (chunk-1 B, W, chunk-1 F);
//  4. M-2n+h+1 rounds (M micro-batches per chunk) of (chunk-0 F + chunk-1 full B) then (chunk-1 F
//     + chunk-0 full B), the first of them at h = n-1 as chunk-0 F and chunk-1 full B apart;
//  5. n-h-1 (chunk-1 full B, chunk-1 F + chunk-0 full B);
//  6. h+1 (chunk-1 B, chunk-0 B), full until the middle one, split from there (for odd h from
//     its chunk-1 B, for even h from its chunk-0 B);
//  7. n-h-1 (W, chunk-0 B) with the backward kind step 6 ended with;  8. h+1 W.
std::vector<Op> DualPipeOrder(const Pipeline& p, RankIdx r) {
  const bool mirrored = TraitsOf(p.schedule).placement == Placement::kMirror;
  const int n = mirrored ? p.ranks / 2 : p.ranks;
  const int h = mirrored ? std::min(r, p.ranks - 1 - r) : r;
  const int per_chunk = mirrored ? p.micro_batches / 2 : p.micro_batches;
  const StageIdx stage[2] = {p.StageAt(r, 0), p.StageAt(r, 1)};
  // The first micro-batch of each chunk: a mirrored rank in the second half meets copy 1 first.
  const int flipped = mirrored && 2 * r >= p.ranks ? 1 : 0;
  const MicroBatchIdx first[2] = {mirrored ? flipped * per_chunk : 0, mirrored ? (1 - flipped) * per_chunk : 0};
  std::vector<Op> ops;
  ops.reserve(3 * 2 * static_cast<std::size_t>(per_chunk));
  int forwards[2] = {0, 0}, backwards[2] = {0, 0};
  std::vector<Op> weight_queue;  // the W's of split B's, oldest first
  std::size_t next_weight = 0;
  auto forward = [&](int c) { ops.push_back({stage[c], first[c] + forwards[c]++, OpKind::kForward}); };
  // A full backward: B and its W as one action, joined to the op before it when `joined`.
  auto full_backward = [&](int c, bool joined) {
    const MicroBatchIdx j = first[c] + backwards[c]++;
    ops.push_back({stage[c], j, OpKind::kBackward, joined});
    ops.push_back({stage[c], j, OpKind::kWeightGrad, true});
  };
  auto split_backward = [&](int c) {
    const MicroBatchIdx j = first[c] + backwards[c]++;
    ops.push_back({stage[c], j, OpKind::kBackward});
    weight_queue.push_back({stage[c], j, OpKind::kWeightGrad});
  };
  auto backward = [&](int c, bool split) { split ? split_backward(c) : full_backward(c, false); };
  auto pending_weight = [&] {
    if (next_weight < weight_queue.size()) ops.push_back(weight_queue[next_weight++]);
  };
  auto overlapped = [&](int forward_chunk, int backward_chunk) {
    forward(forward_chunk);
    full_backward(backward_chunk, true);
  };
  for (int k = 0; k < 2 * (n - h - 1); ++k) forward(0);
  for (int k = 0; k < h + 1; ++k) {
    forward(0);
    forward(1);
  }
  for (int k = 0; k < n - h - 1; ++k) {
    split_backward(1);
    pending_weight();
    forward(1);
  }
  for (int k = 0; k < per_chunk - 2 * n + h + 1; ++k) {
    if (k == 0 && h == n - 1) {
      forward(0);
      full_backward(1, false);
    } else {
      overlapped(0, 1);
    }
    overlapped(1, 0);
  }
  for (int k = 0; k < n - h - 1; ++k) {
    full_backward(1, false);
    overlapped(1, 0);
  }
  bool split = false;
  for (int k = 0; k < h + 1; ++k) {
    if (k == (h + 1) / 2 && h % 2 == 1) split = true;
    backward(1, split);
    if (k == (h + 1) / 2 && h % 2 == 0) split = true;
    backward(0, split);
  }
  for (int k = 0; k < n - h - 1; ++k) {
    pending_weight();
    backward(0, split);
  }
  for (int k = 0; k < h + 1; ++k) pending_weight();
  return ops;
}

std::vector<Op> OrderOf(const Pipeline& p, const OrderTable& table, RankIdx r) {
  switch (TraitsOf(p.schedule).order) {
    case OrderKind::kAllForwardsFirst: {
      std::vector<Op> ops;
      ops.reserve(2 * static_cast<std::size_t>(p.micro_batches));
      for (int j = 0; j < p.micro_batches; ++j) ops.push_back({r, j, OpKind::kForward});
      for (int j = 0; j < p.micro_batches; ++j) ops.push_back({r, j, OpKind::kBackward});
      return ops;
    }
    case OrderKind::kOneFOneB:
      return p.SplitBackward() ? SplitBackwardOrder(p, table, r) : OneFOneBOrder(p, table, r);
    case OrderKind::kZeroBubbleV:
      return ZeroBubbleVOrder(p, r);
    case OrderKind::kDualPipe:
      return DualPipeOrder(p, r);
  }
  return {};
}

}  // namespace

int WarmupForwards(const Pipeline& p, RankIdx r) {
  const int total = p.micro_batches * p.chunks;
  const ScheduleTraits& t = TraitsOf(p.schedule);
  switch (t.order) {
    case OrderKind::kAllForwardsFirst:
      return total;
    case OrderKind::kOneFOneB:
      return std::min(t.warmup_per_rank * (p.ranks - r - 1) + (p.chunks - 1) * p.MicroBatchGroup(), total);
    case OrderKind::kZeroBubbleV:
    case OrderKind::kDualPipe:
      // ZB-V: 2(p-r)-1 chunk-0 forwards, r pairs, and one chunk-1 forward before the first B;
      // DualPipeV: 2(p-r-1) chunk-0 forwards and r+1 pairs; DualPipe: the same with p/2 for p.
      return std::min(TraitsOf(p.schedule).placement == Placement::kMirror ? p.ranks : 2 * p.ranks, total);
  }
  return total;
}

namespace {

std::vector<std::vector<Op>> OrdersOf(const Pipeline& p) {
  const OrderTable table = TraitsOf(p.schedule).order == OrderKind::kOneFOneB ? MegatronTable(p) : OrderTable{};
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
    if (!rank_ops[r].empty() && rank_ops[r].front().joined) {
      return InternalError("the first op of a rank's order cannot join an op before it");
    }
    for (const Op& op : rank_ops[r]) {
      if (op.stage < 0 || op.stage >= p.stages() || op.micro_batch < 0 || op.micro_batch >= p.micro_batches ||
          static_cast<int>(op.kind) >= kinds || p.RankOf(op.stage, p.CopyOf(op.micro_batch)) != r) {
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
  stages_ = p.stages();
  mirrored_ = p.Copies() > 1;
  for (int copy = 0; copy < p.Copies(); ++copy) {
    for (StageIdx s = 0; s < p.stages(); ++s) rank_of_stage_.push_back(p.RankOf(s, copy));
  }
  position_.resize(static_cast<std::size_t>(num_op_ids()));
  for (RankIdx r = 0; r < p.ranks; ++r) {
    for (std::size_t i = 0; i < rank_ops_[r].size(); ++i) {
      position_[IdOf(rank_ops_[r][i])] = static_cast<std::uint32_t>(i);
      has_actions_ = has_actions_ || rank_ops_[r][i].joined;
    }
  }
  if (!has_actions_) return;
  action_first_.resize(position_.size());
  action_last_.resize(position_.size());
  for (const std::vector<Op>& ops : rank_ops_) {
    for (std::size_t i = 0; i < ops.size(); ++i) {
      const OpId id = IdOf(ops[i]);
      action_first_[id] = ops[i].joined ? action_first_[IdOf(ops[i - 1])] : id;
    }
    for (std::size_t i = ops.size(); i-- > 0;) {
      const OpId id = IdOf(ops[i]);
      action_last_[id] = i + 1 < ops.size() && ops[i + 1].joined ? action_last_[IdOf(ops[i + 1])] : id;
    }
  }
}

OpEdges Schedule::ActionDependencies(const Op& op) const {
  const OpId id = IdOf(op);
  OpEdges out;
  if (action_first_[id] != id) return out;
  const std::vector<Op>& ops = rank_ops_[RankOf(op)];
  for (std::size_t i = position_[id];; ++i) {
    for (OpEdge e : OpDependencies(ops[i])) {
      if (action_first_[e.op] == id) continue;  // within the action
      e.op = action_last_[e.op];
      assert(out.count < 2 && "an action's ops have at most two dependencies outside it");
      out.edge[out.count++] = e;
    }
    if (IdOf(ops[i]) == action_last_[id]) break;
  }
  return out;
}

OpEdges Schedule::ActionDependents(const Op& op) const {
  const OpId id = IdOf(op);
  OpEdges out;
  if (action_last_[id] != id) return out;
  const OpId first = action_first_[id];
  const std::vector<Op>& ops = rank_ops_[RankOf(op)];
  for (std::size_t i = position_[first]; i <= position_[id]; ++i) {
    for (OpEdge e : OpDependents(ops[i])) {
      if (action_first_[e.op] == first) continue;  // within the action
      e.op = action_first_[e.op];
      assert(out.count < 2 && "an action's ops have at most two dependents outside it");
      out.edge[out.count++] = e;
    }
  }
  return out;
}

double Schedule::IdealBubble() const {
  const Pipeline& p = pipeline_;
  // The ranks a micro-batch passes before the last one starts: p-1, or p-2 where the two mirrored
  // halves fill the pipeline from both ends (DualPipe).
  const int ramp = p.Copies() > 1 ? p.ranks - 2 : p.ranks - 1;
  return static_cast<double>(ramp) /
         (static_cast<double>(p.chunks) * p.micro_batches * TraitsOf(p.schedule).ideal_bubble_divisor);
}

}  // namespace bmpipe

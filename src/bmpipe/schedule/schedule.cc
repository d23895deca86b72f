#include "bmpipe/schedule/schedule.h"

#include <algorithm>

namespace bmpipe {
namespace {

// The k-th forward or backward op of rank r in Megatron's order. With v = 1 it is micro-batch k
// on the rank's only stage.
Op KthOp(const Pipeline& p, RankIdx r, int k, OpKind kind) {
  const int group = p.ranks * p.chunks;
  const int chunk_in_order = (k / p.ranks) % p.chunks;
  const int chunk = kind == OpKind::kForward ? chunk_in_order : p.chunks - 1 - chunk_in_order;
  const int micro_batch = (k / group) * p.ranks + k % p.ranks;
  return Op{chunk * p.ranks + r, micro_batch, kind};
}

}  // namespace

int WarmupForwards(const Pipeline& p, RankIdx r) {
  const int total = p.micro_batches * p.chunks;
  switch (p.schedule) {
    case ScheduleKind::kGPipe:
      return total;
    case ScheduleKind::kOneFOneB:
      return std::min(p.ranks - r - 1, total);
    case ScheduleKind::kInterleavedOneFOneB:
      return std::min(2 * (p.ranks - r - 1) + (p.chunks - 1) * p.ranks, total);
  }
  return total;
}

Schedule BuildSchedule(const Pipeline& p) {
  Schedule schedule;
  schedule.pipeline = p;
  schedule.rank_ops.resize(p.ranks);
  const int total = p.micro_batches * p.chunks;
  for (RankIdx r = 0; r < p.ranks; ++r) {
    std::vector<Op>& ops = schedule.rank_ops[r];
    ops.reserve(2 * static_cast<std::size_t>(total));
    const int warmup = WarmupForwards(p, r);
    for (int k = 0; k < warmup; ++k) ops.push_back(KthOp(p, r, k, OpKind::kForward));
    for (int k = 0; k < total - warmup; ++k) {
      ops.push_back(KthOp(p, r, warmup + k, OpKind::kForward));
      ops.push_back(KthOp(p, r, k, OpKind::kBackward));
    }
    for (int k = total - warmup; k < total; ++k) ops.push_back(KthOp(p, r, k, OpKind::kBackward));
  }
  return schedule;
}

}  // namespace bmpipe

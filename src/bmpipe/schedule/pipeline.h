// The pipeline's shape and its schedule kind: the table that defines every schedule bmpipe knows
// (name, chunks per rank, whether the backward is split), the placement of stages on ranks in
// both directions, and the shape's checks. Semantics: docs/semantics.md,
// "Ranks, chunks and stages" and "Schedules". The per-rank op orders and the op graph are in
// schedule.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bmpipe/core/error.h"

namespace bmpipe {

using StageIdx = int;
using RankIdx = int;
using MicroBatchIdx = int;

// The sizes a pipeline may have (README, "Limits").
inline constexpr int kMaxRanks = 1024;         // pipeline ranks (p)
inline constexpr int kMaxStages = 4096;        // ranks x chunks (p x v)
inline constexpr int kMaxMicroBatches = 65'536;
inline constexpr std::int64_t kMaxScheduleOps = std::int64_t{1} << 24;  // ops of all kinds

enum class ScheduleKind {
  kGPipe,                // all forwards, then all backwards
  kOneFOneB,             // PipeDream-flush / Megatron 1F1B
  kInterleavedOneFOneB,  // Megatron's interleaved 1F1B (virtual stages, micro-batch groups)
  kZeroBubbleH1,         // 1F1B with the backward split into B and W, W deferred (ZB-H1)
  kZeroBubbleH2,         // ZB-H1 with twice the warm-up and twice the W deferral (ZB-H2)
  kZeroBubbleV,          // two chunks per rank placed in a V, backward split (ZB-V)
  kInterleavedZeroBubble,  // interleaved 1F1B with the backward split, torch's ZB1P order
  kDualPipeV,              // DeepSeek's DualPipe cut in half: V placement, overlapped F and B pairs
};

// Where the stages sit. Loop: stage s is chunk s div p of rank s mod p (Megatron's). V: chunks
// alternate direction, so chunk c of rank r is stage c*p + r for even c and c*p + p-1-r for odd c;
// with two chunks rank r holds stages r and 2p-1-r, and the last rank holds two adjacent stages.
enum class Placement : std::uint8_t { kLoop, kV };

// How schedule.cc builds a rank's order. kAllForwardsFirst: GPipe. kOneFOneB: the 1F1B family,
// Megatron's order table in micro-batch groups (interleaved with several chunks): warm-up
// forwards, (forward, backward) pairs, cool-down backwards, and, when the backward is split, the
// W of each backward deferred by a number of backwards that grows with the rank. kZeroBubbleV:
// torch's ZBVZeroBubble order over the V placement.
// kDualPipeV: torch's DualPipeV order over the V placement, with actions that run several ops.
enum class OrderKind : std::uint8_t { kAllForwardsFirst, kOneFOneB, kZeroBubbleV, kDualPipeV };

// One row of the schedule table: everything that differs between schedules except the op order,
// which schedule.cc builds.
struct ScheduleTraits {
  ScheduleKind kind;
  std::string_view name;     // problem files' pipeline.schedule and --schedule
  std::string_view summary;  // one line for --help and errors
  int min_chunks, max_chunks;
  bool split_backward;  // the backward runs as B (input gradient) and W (weight gradient) ops
  Placement placement;
  // The bubble with equal stages, no p2p and B = W = F is (p-1)/(v*m) / ideal_bubble_divisor.
  double ideal_bubble_divisor;
  OrderKind order;
  // kOneFOneB: rank r's warm-up is (v-1)*N + warmup_per_rank*(p-1-r) forwards (N: the micro-batch
  // group), and with a split backward the W of its k-th backward runs right after backward
  // k + w_lag_per_rank*r (the W's left then run after the last backward, in order).
  int warmup_per_rank = 0, w_lag_per_rank = 0;
  // Whether pipeline.micro_batch_group applies (the order runs chunks in micro-batch groups).
  bool micro_batch_groups = false;
  // The torch.distributed.pipelining schedule class (torchtitan's pipeline_parallel_schedule) whose
  // stage placement and op order are this schedule's; empty where torch has none (the exported
  // CSV still runs in torch's schedule runtime).
  std::string_view torch_class = {};
};

// The schedule table, indexed by ScheduleKind, in the order --help lists them. Adding a schedule
// is a row here and an order builder in schedule.cc.
inline constexpr ScheduleTraits kSchedules[] = {
    {ScheduleKind::kGPipe, "gpipe", "all forwards, then all backwards", 1, 1, false, Placement::kLoop, 1,
     OrderKind::kAllForwardsFirst, 0, 0, false, "GPipe"},
    {ScheduleKind::kOneFOneB, "1f1b", "one forward, one backward (PipeDream-flush, Megatron)", 1, 1, false,
     Placement::kLoop, 1, OrderKind::kOneFOneB, 1, 0, false, "1F1B"},
    {ScheduleKind::kInterleavedOneFOneB, "interleaved-1f1b",
     "Megatron's interleaved 1F1B over several chunks per rank, any micro-batch count", 2, kMaxStages, false,
     Placement::kLoop, 1, OrderKind::kOneFOneB, 2, 0, true, "Interleaved1F1B"},
    {ScheduleKind::kZeroBubbleH1, "zb-h1",
     "1F1B with the backward split into B and W, the last ranks' W deferred into the cool-down (at most p "
     "micro-batches held per rank)",
     1, 1, true, Placement::kLoop, 3, OrderKind::kOneFOneB, 1, 1},
    {ScheduleKind::kZeroBubbleH2, "zb-h2",
     "ZB-H1 with twice the warm-up forwards and twice the W deferral, a parallelogram with no bubble inside "
     "(at most 2p-1 micro-batches held per rank)",
     1, 1, true, Placement::kLoop, 3, OrderKind::kOneFOneB, 2, 2},
    {ScheduleKind::kZeroBubbleV, "zb-v",
     "two chunks per rank in a V (rank r holds stages r and 2p-1-r), backward split into B and W, torch's "
     "ZBVZeroBubble order (at most 2p chunk micro-batches held per rank)",
     2, 2, true, Placement::kV, 3, OrderKind::kZeroBubbleV, 0, 0, false, "ZBVZeroBubble"},
    {ScheduleKind::kInterleavedZeroBubble, "interleaved-zb",
     "interleaved 1F1B with the backward split into B and W and the W's deferred as in ZB-H1, torch's "
     "InterleavedZeroBubble order, any micro-batch count",
     2, kMaxStages, true, Placement::kLoop, 3, OrderKind::kOneFOneB, 1, 1, true, "InterleavedZeroBubble"},
    {ScheduleKind::kDualPipeV, "dualpipev",
     "DeepSeek's DualPipe folded onto half the ranks (two chunks per rank in a V), torch's DualPipeV order: "
     "one chunk's forward and the other's full backward as one action in the steady phase, split backwards "
     "at the ends (at least 2p micro-batches)",
     2, 2, true, Placement::kV, 1.5, OrderKind::kDualPipeV, 0, 0, false, "DualPipeV"},
};
inline constexpr bool TableInKindOrder() {
  for (std::size_t i = 0; i < std::size(kSchedules); ++i) {
    if (static_cast<std::size_t>(kSchedules[i].kind) != i) return false;
  }
  return true;
}
static_assert(TableInKindOrder(), "kSchedules is indexed by ScheduleKind");
inline constexpr const ScheduleTraits& TraitsOf(ScheduleKind kind) { return kSchedules[static_cast<int>(kind)]; }
inline constexpr std::string_view ScheduleName(ScheduleKind kind) { return TraitsOf(kind).name; }
std::optional<ScheduleKind> ScheduleFromName(std::string_view name);
// "'gpipe', '1f1b', ..." for messages.
std::string ScheduleNames();
// The schedule whose ScheduleTraits::torch_class is `name`, and "GPipe, 1F1B, ..." for messages.
std::optional<ScheduleKind> ScheduleFromTorchClass(std::string_view name);
std::string TorchScheduleClasses();

struct Pipeline {
  ScheduleKind schedule = ScheduleKind::kOneFOneB;
  int ranks = 1;          // p: pipeline-parallel size
  int chunks = 1;         // v: model chunks (virtual stages) per rank
  int micro_batches = 1;  // m
  // Interleaved 1F1B: micro-batches each chunk runs in a row (Megatron's
  // --microbatch-group-size-per-virtual-pipeline-stage); 0 means p, Megatron's default.
  int micro_batch_group = 0;

  int stages() const { return ranks * chunks; }
  int MicroBatchGroup() const { return micro_batch_group > 0 ? micro_batch_group : ranks; }
  bool SplitBackward() const { return TraitsOf(schedule).split_backward; }
  // The placement (Placement): every consumer maps stages and (rank, chunk) through these.
  int ChunkOf(StageIdx s) const { return s / ranks; }
  RankIdx RankOf(StageIdx s) const {
    const int c = s / ranks, i = s - c * ranks;
    return Reversed(c) ? ranks - 1 - i : i;
  }
  StageIdx StageAt(RankIdx r, int chunk) const { return chunk * ranks + (Reversed(chunk) ? ranks - 1 - r : r); }
  // Ops of all kinds the schedule runs: forward and backward, and W when the backward is split.
  std::int64_t Ops() const;

 private:
  bool Reversed(int chunk) const { return (chunk & 1) != 0 && TraitsOf(schedule).placement == Placement::kV; }
};

// Checks the pipeline shape against the number of layers. Messages name the problem file's keys.
Status ValidatePipeline(const Pipeline& pipeline, int num_layers);

}  // namespace bmpipe

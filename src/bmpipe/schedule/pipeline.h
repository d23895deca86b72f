// The pipeline's shape and its schedule kind: the table that defines every schedule bmpipe knows
// (name, chunks per rank, whether the backward is split), the placement of stages on ranks in
// both directions, and the shape's checks. Semantics: docs/semantics.md,
// "Ranks, chunks and stages" and "Schedules". The per-rank op orders and the op graph are in
// schedule.h.
#pragma once

#include <algorithm>
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
  kDualPipe,               // DeepSeek's DualPipe: every stage on two ranks, micro-batches fed from both ends
  kDualPipeV,              // DeepSeek's DualPipe cut in half: V placement, overlapped F and B pairs
};

// Where the stages sit. Loop: stage s is chunk s div p of rank s mod p (Megatron's). V: chunks
// alternate direction, so chunk c of rank r is stage c*p + r for even c and c*p + p-1-r for odd c;
// with two chunks rank r holds stages r and 2p-1-r, and the last rank holds two adjacent stages.
// Mirror (DualPipe): p stages, each held by two ranks (two copies of its layers). The first half
// of the micro-batches (copy 0) runs stage s on rank s, the second half (copy 1) on rank p-1-s,
// so the two halves flow in opposite directions; stage s is chunk 0 of its ranks when s < p/2 and
// chunk 1 otherwise, and rank r holds stages min(r, p-1-r) (chunk 0) and max(r, p-1-r) (chunk 1).
enum class Placement : std::uint8_t { kLoop, kV, kMirror };

// How schedule.cc builds a rank's order. kAllForwardsFirst: GPipe. kOneFOneB: the 1F1B family,
// Megatron's order table in micro-batch groups (interleaved with several chunks): warm-up
// forwards, (forward, backward) pairs, cool-down backwards, and, when the backward is split, the
// W of each backward deferred by a number of backwards that grows with the rank. kZeroBubbleV:
// torch's ZBVZeroBubble order over the V placement.
// kDualPipe: DeepSeek's DualPipe order, with actions that run several ops; over the V placement it
// is torch's DualPipeV, over the mirror placement DeepSeek's DualPipe.
enum class OrderKind : std::uint8_t { kAllForwardsFirst, kOneFOneB, kZeroBubbleV, kDualPipe };

// One row of the schedule table: everything that differs between schedules except the op order,
// which schedule.cc builds.
struct ScheduleTraits {
  ScheduleKind kind;
  std::string_view name;     // problem files' pipeline.schedule and --schedule
  std::string_view summary;  // one line for --help and errors
  int min_chunks, max_chunks;
  bool split_backward;  // the backward runs as B (input gradient) and W (weight gradient) ops
  Placement placement;
  // The bubble with equal stages, no p2p and B = W = F is (p-1)/(v*m) / ideal_bubble_divisor
  // ((p-2) for p-1 with the mirror placement).
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
  // The fewest micro-batches the order runs, per rank (DualPipe's two per rank), or 0 for none.
  int min_micro_batches_per_rank = 0;
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
    {ScheduleKind::kDualPipe, "dualpipe",
     "DeepSeek's DualPipe: p stages, each on two ranks (rank r holds stages r and p-1-r, two chunks), half the "
     "micro-batches fed from each end; one direction's forward and the other's full backward as one action in "
     "the steady phase (even p, an even count of at least 2p micro-batches)",
     2, 2, true, Placement::kMirror, 1.5, OrderKind::kDualPipe, 0, 0, false, {}, 2},
    {ScheduleKind::kDualPipeV, "dualpipev",
     "DeepSeek's DualPipe folded onto half the ranks (two chunks per rank in a V), torch's DualPipeV order: "
     "one chunk's forward and the other's full backward as one action in the steady phase, split backwards "
     "at the ends (at least 2p micro-batches)",
     2, 2, true, Placement::kV, 1.5, OrderKind::kDualPipe, 0, 0, false, "DualPipeV", 2},
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
  // Overlapped pairs (docs/semantics.md, "Actions"): an action that joins a forward to another
  // micro-batch's backward runs each one's communication (LayerOption::forward_comm_ns,
  // backward_comm_ns) under the other's compute. DualPipe's and DualPipeV's pairs, and under
  // interleaved 1F1B Megatron's combined 1F1B (--overlap-moe-expert-parallel-comm), which joins
  // each forward of the steady phase to the backward after it. Off: pairs run one op after the
  // other (torch's OVERLAP_F_B without an overlap function).
  bool overlap = false;

  // The stages the layers are split into: ranks x chunks, or half that where each stage has two
  // copies (the mirror placement).
  int stages() const { return ranks * chunks / Copies(); }
  int MicroBatchGroup() const { return micro_batch_group > 0 ? micro_batch_group : ranks; }
  bool SplitBackward() const { return TraitsOf(schedule).split_backward; }
  // The placement (Placement): every consumer maps stages and (rank, chunk) through these.
  // Copies of every stage on the ranks (2 for the mirror placement), and the copy micro-batch j
  // runs through.
  int Copies() const { return Mirrored() ? 2 : 1; }
  int CopyOf(MicroBatchIdx j) const { return Mirrored() && 2 * j >= micro_batches ? 1 : 0; }
  int ChunkOf(StageIdx s) const { return Mirrored() ? (2 * s >= ranks ? 1 : 0) : s / ranks; }
  // The rank that holds copy `copy` of stage s.
  RankIdx RankOf(StageIdx s, int copy = 0) const {
    if (Mirrored()) return copy == 0 ? s : ranks - 1 - s;
    const int c = s / ranks, i = s - c * ranks;
    return Reversed(c) ? ranks - 1 - i : i;
  }
  // The stage chunk `chunk` of rank r holds.
  StageIdx StageAt(RankIdx r, int chunk) const {
    if (Mirrored()) return chunk == 0 ? std::min(r, ranks - 1 - r) : std::max(r, ranks - 1 - r);
    return chunk * ranks + (Reversed(chunk) ? ranks - 1 - r : r);
  }
  // Ops of all kinds the schedule runs: forward and backward, and W when the backward is split.
  std::int64_t Ops() const;

 private:
  bool Reversed(int chunk) const { return (chunk & 1) != 0 && TraitsOf(schedule).placement == Placement::kV; }
  bool Mirrored() const { return TraitsOf(schedule).placement == Placement::kMirror; }
};

// Checks the pipeline shape against the number of layers. Messages name the problem file's keys.
Status ValidatePipeline(const Pipeline& pipeline, int num_layers);

}  // namespace bmpipe

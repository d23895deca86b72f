#include "bmpipe/schedule/pipeline.h"

#include <fmt/format.h>

namespace bmpipe {

namespace {

// The table's rows that `keep` takes, each written by `write`, joined by `separator`.
template <typename Keep, typename Write>
std::string JoinSchedules(Keep keep, Write write, std::string_view separator) {
  std::string names;
  for (const ScheduleTraits& t : kSchedules) {
    if (keep(t)) names += (names.empty() ? std::string() : std::string(separator)) + write(t);
  }
  return names;
}

std::string Quoted(const ScheduleTraits& t) { return fmt::format("'{}'", t.name); }

}  // namespace

std::optional<ScheduleKind> ScheduleFromName(std::string_view name) {
  for (const ScheduleTraits& t : kSchedules) {
    if (t.name == name) return t.kind;
  }
  if (name == "interleaved_1f1b" || name == "interleaved") return ScheduleKind::kInterleavedOneFOneB;
  return std::nullopt;
}

std::string ScheduleNames() {
  return JoinSchedules([](const ScheduleTraits&) { return true; }, Quoted, ", ");
}

std::optional<ScheduleKind> ScheduleFromTorchClass(std::string_view name) {
  for (const ScheduleTraits& t : kSchedules) {
    if (!t.torch_class.empty() && t.torch_class == name) return t.kind;
  }
  return std::nullopt;
}

std::string TorchScheduleClasses() {
  return JoinSchedules([](const ScheduleTraits& t) { return !t.torch_class.empty(); },
                       [](const ScheduleTraits& t) { return fmt::format("{} ({})", t.torch_class, t.name); }, ", ");
}

std::int64_t Pipeline::Ops() const {
  return (SplitBackward() ? 3 : 2) * std::int64_t{stages()} * micro_batches;
}

namespace {

std::string GroupedScheduleNames() {
  return JoinSchedules([](const ScheduleTraits& t) { return t.micro_batch_groups; }, Quoted, " and ");
}

// Megatron's conditions on its micro-batch groups: p <= N <= m, and the last group, if short,
// holds at least p micro-batches.
bool GroupRuns(int ranks, int micro_batches, int group) {
  const int rest = micro_batches % group;
  return group >= ranks && group <= micro_batches && (rest == 0 || rest >= ranks);
}

Status ValidateInterleaving(const Pipeline& p) {
  if (p.micro_batch_group < 0) {
    return InvalidInput(fmt::format("pipeline.micro_batch_group = {}: must be at least 1 (0 or absent: the ranks, {})",
                                    p.micro_batch_group, p.ranks));
  }
  const std::string_view name = ScheduleName(p.schedule);
  if (p.micro_batches < p.ranks) {
    return InvalidInput(fmt::format(
        "pipeline.micro_batches = {}: schedule '{}' needs at least pipeline.ranks = {} micro-batches (Megatron's "
        "order); raise micro_batches or set chunks to 1",
        p.micro_batches, name, p.ranks));
  }
  const int group = p.MicroBatchGroup();
  if (GroupRuns(p.ranks, p.micro_batches, group)) return {};
  // The group sizes that run, nearest the one asked for first.
  std::vector<int> fits;
  for (int n = p.ranks; n <= p.micro_batches && fits.size() < 3; ++n) {
    if (GroupRuns(p.ranks, p.micro_batches, n)) fits.push_back(n);
  }
  const std::string groups = fits.empty() ? std::string()
                                           : fmt::format("set pipeline.micro_batch_group to {} (Megatron's "
                                                         "--microbatch-group-size-per-virtual-pipeline-stage), or ",
                                                         fmt::join(fits, " or "));
  if (p.micro_batch_group == 0) {
    // Megatron's default groups of p micro-batches: m must be a multiple of p.
    const int below = p.micro_batches / p.ranks * p.ranks, above = below + p.ranks;
    return InvalidInput(fmt::format(
        "pipeline.micro_batches = {}: schedule '{}' in Megatron's default groups of pipeline.ranks = {} "
        "micro-batches needs a multiple of {}; use {}, or {}set chunks to 1",
        p.micro_batches, name, p.ranks, p.ranks, below > 0 ? fmt::format("{} or {}", below, above) : std::to_string(above),
        groups));
  }
  return InvalidInput(fmt::format(
      "pipeline.micro_batch_group = {}: schedule '{}' runs each chunk on groups of N micro-batches with "
      "pipeline.ranks <= N <= micro_batches and micro_batches mod N either 0 or at least the ranks; with {} "
      "micro-batches on {} ranks {}set chunks to 1",
      group, name, p.micro_batches, p.ranks, groups));
}

}  // namespace

Status ValidatePipeline(const Pipeline& p, int num_layers) {
  if (p.ranks < 1 || p.ranks > kMaxRanks) {
    return InvalidInput(fmt::format("pipeline.ranks = {}: must be between 1 and {} pipeline ranks", p.ranks, kMaxRanks));
  }
  if (p.chunks < 1 || p.chunks > kMaxStages) {
    return InvalidInput(fmt::format("pipeline.chunks = {}: must be between 1 and {}", p.chunks, kMaxStages));
  }
  if (p.micro_batches < 1) {
    return InvalidInput(fmt::format(
        "pipeline.micro_batches = {}: a pipeline needs at least 1 micro-batch; set it to global batch / "
        "(data-parallel size x micro-batch size)",
        p.micro_batches));
  }
  if (p.micro_batches > kMaxMicroBatches) {
    return InvalidInput(fmt::format("pipeline.micro_batches = {}: bmpipe plans at most {} micro-batches; a larger "
                                    "micro-batch size gives fewer",
                                    p.micro_batches, kMaxMicroBatches));
  }
  const std::int64_t stages = std::int64_t{p.ranks} * p.chunks;  // stage copies
  if (stages > kMaxStages) {
    return InvalidInput(fmt::format("pipeline: ranks x chunks = {} x {} = {} pipeline stages; bmpipe plans at "
                                    "most {}; lower pipeline.ranks or chunks",
                                    p.ranks, p.chunks, stages, kMaxStages));
  }
  if (p.Ops() > kMaxScheduleOps) {
    return InvalidInput(fmt::format("pipeline: {} stages x {} micro-batches make {} ops under schedule '{}'; bmpipe "
                                    "schedules at most {}; fewer micro-batches or stages would do",
                                    p.stages(), p.micro_batches, p.Ops(), ScheduleName(p.schedule), kMaxScheduleOps));
  }
  const ScheduleTraits& traits = TraitsOf(p.schedule);
  if (p.chunks < traits.min_chunks || p.chunks > traits.max_chunks) {
    if (p.schedule == ScheduleKind::kOneFOneB) {
      return InternalError("1F1B with several chunks per rank must be the interleaved schedule");
    }
    const std::string_view one_chunk = traits.split_backward ? "zb-h1" : "1f1b";
    const std::string allowed = traits.min_chunks == traits.max_chunks
                                    ? (traits.min_chunks == 1 ? std::string("one") : fmt::format("{}", traits.min_chunks))
                                    : fmt::format("at least {}", traits.min_chunks);
    return InvalidInput(fmt::format("pipeline.chunks = {}: schedule '{}' runs {} chunk{} per rank; set chunks to {}{}",
                                    p.chunks, traits.name, allowed, traits.max_chunks == 1 ? "" : "s",
                                    traits.min_chunks == 1 && traits.max_chunks == 1 ? "1" : allowed,
                                    traits.max_chunks > 1       ? fmt::format(" or use schedule '{}'", one_chunk)
                                    : traits.split_backward     ? " or use schedule 'interleaved-zb' for interleaving"
                                                                : " or use schedule 'interleaved-1f1b' for interleaving"));
  }
  if (traits.placement == Placement::kMirror && p.ranks % 2 != 0) {
    return InvalidInput(fmt::format("pipeline.ranks = {}: schedule '{}' pairs rank r with rank ranks-1-r and needs an "
                                    "even number of ranks, such as {}; or use schedule 'dualpipev', which folds the "
                                    "pipeline onto half the ranks",
                                    p.ranks, traits.name, p.ranks + 1));
  }
  if (p.micro_batches < traits.min_micro_batches_per_rank * p.ranks) {
    return InvalidInput(fmt::format(
        "pipeline.micro_batches = {}: schedule '{}' needs at least {} x pipeline.ranks = {} micro-batches (DeepSeek's "
        "DualPipe order); raise micro_batches or use schedule 'zb-v'",
        p.micro_batches, traits.name, traits.min_micro_batches_per_rank, traits.min_micro_batches_per_rank * p.ranks));
  }
  if (traits.placement == Placement::kMirror && p.micro_batches % 2 != 0) {
    return InvalidInput(fmt::format("pipeline.micro_batches = {}: schedule '{}' feeds half the micro-batches from each "
                                    "end and needs an even number, such as {}",
                                    p.micro_batches, traits.name, p.micro_batches + 1));
  }
  if (p.overlap && p.schedule != ScheduleKind::kInterleavedOneFOneB && p.schedule != ScheduleKind::kDualPipe &&
      p.schedule != ScheduleKind::kDualPipeV) {
    return InvalidInput(fmt::format(
        "pipeline.overlap: schedule '{}' runs no forward and backward of two micro-batches as one action; overlapped "
        "pairs are DualPipe's, DualPipeV's and Megatron's combined 1F1B (interleaved-1f1b); remove it or use one of "
        "those schedules",
        traits.name));
  }
  if (p.micro_batch_group != 0 && !traits.micro_batch_groups) {
    return InvalidInput(fmt::format(
        "pipeline.micro_batch_group = {}: schedule '{}' runs no micro-batch groups (only {} do); remove it",
        p.micro_batch_group, traits.name, GroupedScheduleNames()));
  }
  if (traits.micro_batch_groups) {
    Status interleaving = ValidateInterleaving(p);
    if (!interleaving.ok()) return interleaving;
  }
  if (p.stages() > num_layers) {
    return InvalidInput(fmt::format(
        "pipeline: ranks x chunks = {} x {} = {} pipeline stages, but the model has only {} layers; "
        "every stage needs at least one layer, so lower pipeline.ranks or chunks",
        p.ranks, p.chunks, p.stages(), num_layers));
  }
  return {};
}

}  // namespace bmpipe

#include "bmpipe/cost/training_setup.h"

#include <algorithm>

#include <fmt/format.h>

#include "bmpipe/cost/layer_ops.h"
#include "bmpipe/problem/recompute.h"

namespace bmpipe {
namespace {

// The divisors of n up to `limit`, as "1, 2, 4, 8" for messages.
std::string Divisors(int n, int limit) {
  std::string out;
  for (int d = 1; d <= std::min(n, limit); ++d) {
    if (n % d == 0) out += (out.empty() ? "" : ", ") + std::to_string(d);
  }
  return out;
}

}  // namespace

std::string_view PrecisionName(Precision p) { return p == Precision::kFp8 ? "fp8" : "bf16"; }
std::string_view StateDtypeName(StateDtype d) { return d == StateDtype::kBf16 ? "bf16" : "fp32"; }

int ZeroStage(const TrainingSetup& setup) { return std::max(setup.zero, setup.distributed_optimizer ? 1 : 0); }

int ExpertTensorParallel(const TrainingSetup& setup) { return setup.etp > 0 ? setup.etp : setup.tp; }

int ExpertDataParallel(const TrainingSetup& setup) {
  const long stage = static_cast<long>(setup.tp) * setup.cp * setup.dp;
  const long expert = static_cast<long>(setup.ep) * ExpertTensorParallel(setup);
  return expert > 0 && stage % expert == 0 ? static_cast<int>(stage / expert) : 1;
}

Bytes ReservedBytesDefault(const DeviceSpec& device) {
  return (Bytes{1} << 30) + device.memory_bytes / 20;
}

int MicroBatches(const TrainingSetup& setup) {
  return static_cast<int>(setup.global_batch_size / (std::int64_t{setup.micro_batch_size} * setup.dp));
}

Pipeline SetupPipeline(const TrainingSetup& setup) {
  Pipeline p;
  p.ranks = setup.pp;
  p.chunks = setup.vpp;
  p.micro_batches = MicroBatches(setup);
  p.schedule = setup.gpipe ? ScheduleKind::kGPipe
                           : (setup.vpp > 1 ? ScheduleKind::kInterleavedOneFOneB : ScheduleKind::kOneFOneB);
  return p;
}

Status ValidateSetup(const ModelSpec& model, const DeviceSpec& device, const TrainingSetup& s) {
  // Upper bounds far beyond any real run; they keep every product below inside 64 bits.
  auto in_range = [](const char* flag, int v, int max, const char* fix) -> Status {
    if (v >= 1 && v <= max) return {};
    return InvalidInput(fmt::format("{} = {} must be between 1 and {}; {}", flag, v, max, fix));
  };
  for (Status st : {in_range("--tp", s.tp, kMaxTensorParallel, "give the tensor-parallel size"),
                    in_range("--pp", s.pp, kMaxRanks, "give the number of pipeline stages"),
                    in_range("--dp", s.dp, kMaxDataParallel, "give the data-parallel size"),
                    in_range("--vpp", s.vpp, kMaxStages, "give model chunks per pipeline rank (1 = no interleaving)"),
                    in_range("--mbs", s.micro_batch_size, kMaxBatch, "give sequences per micro-batch"),
                    in_range("--gbs", s.global_batch_size, kMaxBatch, "give sequences per iteration"),
                    in_range("--seq", s.seq, kMaxSequence, "give the sequence length in tokens")}) {
    if (!st.ok()) return st;
  }
  if (model.heads % s.tp != 0) {
    return InvalidInput(fmt::format("--tp {} does not divide the model's {} attention heads; use one of {}", s.tp,
                                    model.heads, Divisors(model.heads, 64)));
  }
  if (!model.latent.enabled() && model.kv_heads % s.tp != 0) {
    return InvalidInput(fmt::format(
        "--tp {} does not divide the model's {} key-value heads (grouped-query attention splits whole KV groups "
        "across tensor-parallel ranks); use one of {}",
        s.tp, model.kv_heads, Divisors(model.kv_heads, 64)));
  }
  if (model.ffn % s.tp != 0) {
    return InvalidInput(fmt::format("--tp {} does not divide the MLP size {}; use one of {}", s.tp, model.ffn,
                                    Divisors(model.ffn, 64)));
  }
  if (model.moe.enabled() && model.moe.ffn % s.tp != 0) {
    return InvalidInput(fmt::format("--tp {} does not divide the expert MLP size {}; use one of {}", s.tp,
                                    model.moe.ffn, Divisors(model.moe.ffn, 64)));
  }
  if (s.devices > 0 && static_cast<long>(s.tp) * s.pp * s.dp != s.devices) {
    return InvalidInput(fmt::format("--tp {} x --pp {} x --dp {} = {} devices, but --devices is {}; make the product "
                                    "equal the device count (e.g. --dp {})",
                                    s.tp, s.pp, s.dp, static_cast<long>(s.tp) * s.pp * s.dp, s.devices,
                                    s.devices % (s.tp * s.pp) == 0 ? std::to_string(s.devices / (s.tp * s.pp))
                                                                   : std::string("that fits")));
  }
  const long per_step = static_cast<long>(s.micro_batch_size) * s.dp;
  if (s.global_batch_size % per_step != 0) {
    return InvalidInput(fmt::format(
        "--gbs {} is not divisible by --mbs {} x --dp {} = {}; use a global batch that is a multiple of {} (e.g. {})",
        s.global_batch_size, s.micro_batch_size, s.dp, per_step, per_step,
        std::max(per_step, (s.global_batch_size / per_step) * per_step)));
  }
  const int m = MicroBatches(s);
  if (m > kMaxMicroBatches) {
    return InvalidInput(fmt::format("--gbs {} / (--mbs {} x --dp {}) = {} micro-batches; bmpipe plans at most {}; "
                                    "raise --mbs or --dp, or lower --gbs",
                                    s.global_batch_size, s.micro_batch_size, s.dp, m, kMaxMicroBatches));
  }
  if (s.vpp > 1 && m % s.pp != 0) {
    return InvalidInput(fmt::format("interleaving (--vpp {}) needs the micro-batch count {} (= gbs / (mbs x dp)) to "
                                    "be a multiple of --pp {}; change --gbs or use --vpp 1",
                                    s.vpp, m, s.pp));
  }
  if (s.vpp > 1 && s.gpipe) return InvalidInput("--schedule gpipe cannot interleave; use --vpp 1");
  const long stages = static_cast<long>(s.pp) * s.vpp;
  if (stages > model.layers + 2) {
    return InvalidInput(fmt::format("--pp {} x --vpp {} = {} stages, but the model has only {} layers (embedding, "
                                    "{} decoder layers, head); lower --pp or --vpp",
                                    s.pp, s.vpp, stages, model.layers + 2, model.layers));
  }
  if (s.sequence_parallel && s.seq % s.tp != 0) {
    return InvalidInput(fmt::format("--sequence-parallel splits the sequence over --tp {}, but --seq {} is not a "
                                    "multiple of it; use a multiple of {}",
                                    s.tp, s.seq, s.tp));
  }
  if (model.learned_positions > 0 && s.seq > model.learned_positions) {
    return InvalidInput(fmt::format("--seq {} exceeds the model's {} learned positions; use --seq {} or less", s.seq,
                                    model.learned_positions, model.learned_positions));
  }
  if (!(s.dp_overlap >= 0 && s.dp_overlap <= 1)) {
    return InvalidInput(fmt::format("--dp-overlap {} must be a fraction in [0, 1]", s.dp_overlap));
  }
  const Bytes reserved = s.reserved_bytes.value_or(ReservedBytesDefault(device));
  if (reserved >= device.memory_bytes) {
    return InvalidInput(fmt::format("reserved memory {} bytes is not below the device's {} bytes; lower --reserved-gb",
                                    reserved, device.memory_bytes));
  }
  if (model.layers + 2 > kMaxLayers) {
    return InvalidInput(fmt::format("the model has {} decoder layers; with the embedding and the head bmpipe plans at "
                                    "most {} layers",
                                    model.layers, kMaxLayers));
  }
  // The pipeline's own limits (problem.h: sizes, ops of the schedule).
  if (Status pipeline = ValidatePipeline(SetupPipeline(s), model.layers + 2); !pipeline.ok()) return pipeline;
  if (s.recompute.empty()) return InvalidInput("--recompute needs at least one option, e.g. none");
  for (const std::string& option : s.recompute) {
    Result<Recompute> parsed = ParseRecompute(option);
    if (!parsed.ok()) return InvalidInput("--recompute: " + parsed.error().message);
  }
  return {};
}

}  // namespace bmpipe

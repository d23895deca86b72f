#include "bmpipe/cost/training_setup.h"

#include <algorithm>
#include <initializer_list>

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

// Context and expert parallelism, precision, sharding, overlap and offloading.
Status ValidateNewParallelism(const ModelSpec& model, const DeviceSpec& device, const TrainingSetup& s) {
  if (s.cp < 1 || s.cp > kMaxTensorParallel) {
    return InvalidInput(fmt::format("--cp = {} must be between 1 and {}; give the context-parallel size", s.cp,
                                    kMaxTensorParallel));
  }
  if (s.cp > 1) {
    // Megatron splits the sequence into 2 x cp chunks (each rank takes one from each end, which
    // balances the causal mask), each divisible by tp with sequence parallelism.
    const long chunk = 2L * s.cp * (s.sequence_parallel ? s.tp : 1);
    if (s.seq % chunk != 0) {
      return InvalidInput(fmt::format("--cp {} splits the sequence into 2 x cp load-balanced chunks{}, but --seq {} is "
                                      "not a multiple of {}; use a multiple of {}",
                                      s.cp, s.sequence_parallel ? " divisible by --tp" : "", s.seq, chunk, chunk));
    }
    if (!s.flash_attention) {
      return InvalidInput(fmt::format("--cp {} runs ring attention in the fused kernel; add --flash-attn", s.cp));
    }
    if (model.mamba.enabled() || model.deltanet.enabled()) {
      return InvalidInput(fmt::format(
          "--cp {}: context parallelism of the model's {} layers (their scan passes a state along the whole "
          "sequence) is not costed yet; use --cp 1",
          s.cp, model.mamba.enabled() ? "Mamba-2" : "Gated DeltaNet"));
    }
  }
  if (model.sparse.enabled() && !s.flash_attention) {
    return InvalidInput(
        "the model's DeepSeek sparse attention runs as fused kernels (the indexer's scores and top-k, and the "
        "attention over the selected keys); add --flash-attn");
  }
  if (s.ep < 1 || s.ep > (1 << 16)) {
    return InvalidInput(fmt::format("--ep = {} must be between 1 and 65536; give the expert-parallel size", s.ep));
  }
  if (s.etp < 0 || s.etp > kMaxTensorParallel) {
    return InvalidInput(fmt::format("--etp = {} must be between 1 and {} (or 0: the same as --tp)", s.etp,
                                    kMaxTensorParallel));
  }
  if (!model.moe.enabled() && (s.ep > 1 || (s.etp > 0 && s.etp != s.tp))) {
    return InvalidInput(fmt::format("--ep {} / --etp {}: the model has no mixture-of-experts layers; use --ep 1 and no "
                                    "--etp",
                                    s.ep, s.etp));
  }
  if (model.moe.enabled()) {
    const int etp = ExpertTensorParallel(s);
    if (model.moe.experts % s.ep != 0) {
      return InvalidInput(fmt::format("--ep {} does not divide the model's {} routed experts; use one of {}", s.ep,
                                      model.moe.experts, Divisors(model.moe.experts, 1 << 16)));
    }
    if (model.moe.ffn % etp != 0) {
      return InvalidInput(fmt::format("--etp {} does not divide the expert MLP size {}; use one of {}", etp,
                                      model.moe.ffn, Divisors(model.moe.ffn, 64)));
    }
    const long stage = static_cast<long>(s.tp) * s.cp * s.dp;
    if (stage % (static_cast<long>(s.ep) * etp) != 0) {
      return InvalidInput(fmt::format(
          "--ep {} x --etp {} = {} must divide the devices of a pipeline stage, --tp {} x --cp {} x --dp {} = {} (the "
          "experts are spread over them); lower --ep or raise --dp",
          s.ep, etp, static_cast<long>(s.ep) * etp, s.tp, s.cp, s.dp, stage));
    }
    if (!(s.moe_imbalance == 0 || (s.moe_imbalance >= 1 && s.moe_imbalance <= 16))) {
      return InvalidInput(fmt::format("--moe-imbalance {} must lie in [1, 16]: the busiest expert-parallel rank's "
                                      "routed tokens over the even share (1: perfectly balanced; 0 or not given: "
                                      "from --moe-routing)",
                                      s.moe_imbalance));
    }
    if (!(s.moe_capacity_factor == 0 || (s.moe_capacity_factor >= 1 && s.moe_capacity_factor <= 64))) {
      return InvalidInput(fmt::format("--moe-capacity-factor {} must be 0 (dropless) or in [1, 64]",
                                      s.moe_capacity_factor));
    }
  }
  if (!(s.ep_comm_overlap >= 0 && s.ep_comm_overlap <= 1)) {
    return InvalidInput(fmt::format("--ep-comm-overlap {} must be a fraction in [0, 1]: the part of the MoE "
                                    "all-to-alls hidden behind another micro-batch's compute",
                                    s.ep_comm_overlap));
  }
  if (s.overlap_pairs && s.ep_comm_overlap > 0) {
    return InvalidInput(fmt::format(
        "--ep-comm-overlap {} with --overlap-pairs: the schedule's overlapped pairs hide the all-to-all by its size "
        "(docs/semantics.md, \"Actions\"), and a fixed fraction on top would hide it twice; drop --ep-comm-overlap",
        s.ep_comm_overlap));
  }
  if (!model.moe.enabled() &&
      (s.moe_dispatcher != MoeDispatcher::kAllToAll || s.ep_comm_overlap > 0 || s.moe_cuda_graphs)) {
    return InvalidInput(fmt::format("--moe-dispatcher, --ep-comm-overlap and --moe-cuda-graphs apply to MoE models; "
                                    "'{}' has no routed experts, so drop them",
                                    model.name));
  }
  if (s.zero < 0 || s.zero > 3) {
    return InvalidInput(fmt::format("--zero {} is not a ZeRO stage; use 0, 1 (optimizer state sharded, as "
                                    "--distributed-optimizer), 2 (and gradients) or 3 (and parameters, FSDP)",
                                    s.zero));
  }
  if (IsFp4(s.precision) && device.peak_fp4_flops <= 0) {
    return InvalidInput(fmt::format("--precision nvfp4: the device '{}' has no FP4 tensor cores (peak_fp4_flops); use "
                                    "--precision fp8, or a Blackwell device (b200-180gb, gb200, b300-288gb, gb300)",
                                    device.name));
  }
  if (s.precision != Precision::kNvFp4 && IsQuantized(s.precision) && device.peak_fp8_flops <= 0) {
    return InvalidInput(fmt::format("--precision {}: the device '{}' has no FP8 peak (peak_fp8_flops); use --precision "
                                    "bf16 or a device with FP8 units (h100-80gb, h200-141gb, ...)",
                                    PrecisionName(s.precision), device.name));
  }
  if (s.fp8_recipe != "tensorwise" && s.fp8_recipe != "delayed" && s.fp8_recipe != "blockwise") {
    return InvalidInput(fmt::format("--fp8-recipe {}: give tensorwise, delayed or blockwise (MXFP8 is --precision "
                                    "mxfp8)",
                                    s.fp8_recipe));
  }
  if (s.precision == Precision::kMxFp8 && !device.mx_formats) {
    return InvalidInput(fmt::format("--precision mxfp8: the device '{}' has no block-scaled (MX) tensor cores "
                                    "(mx_formats); use --precision fp8, or a Blackwell device (b200-180gb, gb200, "
                                    "b300-288gb, gb300)",
                                    device.name));
  }
  if (s.fp8_params && !IsQuantized(s.precision)) {
    return InvalidInput("--fp8-params keeps the weights in the GEMMs' format (FP8 or NVFP4), which needs quantized "
                        "GEMMs; add --precision fp8, mxfp8 or nvfp4, or drop --fp8-params");
  }
  if (s.no_fp8_transpose_cache && !IsQuantized(s.precision)) {
    return InvalidInput("--no-fp8-transpose-cache drops the transposes of quantized weights, which needs quantized "
                        "GEMMs; add --precision fp8, mxfp8 or nvfp4, or drop --no-fp8-transpose-cache");
  }
  if (s.no_fp8_transpose_cache && ZeroStage(s) >= 3) {
    return InvalidInput("--no-fp8-transpose-cache with --zero 3: Megatron-FSDP keeps or drops the FP8 transposes by "
                        "its own setting, which bmpipe does not cost; use --zero 2 or less, or drop "
                        "--no-fp8-transpose-cache");
  }
  if (s.fp8_params && ZeroStage(s) < 1) {
    return InvalidInput("--fp8-params: Megatron gathers FP8 weights only from the distributed optimizer or FSDP "
                        "(--fp8-param-gather asserts it); add --distributed-optimizer (--zero 1) or --zero 2/3");
  }
  if (!(s.tp_comm_overlap >= 0 && s.tp_comm_overlap <= 1)) {
    return InvalidInput(fmt::format("--tp-comm-overlap {} must be a fraction in [0, 1]", s.tp_comm_overlap));
  }
  if (s.offload_keeps_master && !s.offload_optimizer) {
    return InvalidInput("the master weights stay on the device only in an offloaded optimizer; use --offload "
                        "optimizer-moments (or drop the setting)");
  }
  bool offload_activations = false;
  for (const std::string& option : s.recompute) {
    Result<Recompute> parsed = ParseRecompute(option);
    if (parsed.ok() && (parsed.value().parts & kOffloadActivations)) offload_activations = true;
  }
  if (!s.offload_modules.empty() && !offload_activations) {
    return InvalidInput("--offload-modules names what the activation offload options move, but none is offered; add "
                        "--offload activations (or drop --offload-modules)");
  }
  for (const std::string& module : s.offload_modules) {
    if (std::find(std::begin(kOffloadModules), std::end(kOffloadModules), module) == std::end(kOffloadModules)) {
      return InvalidInput(fmt::format("--offload-modules: '{}' is not one of megatron-core's offload modules bmpipe "
                                      "models ({})",
                                      module, fmt::join(kOffloadModules, ", ")));
    }
  }
  if ((offload_activations || s.offload_optimizer) && device.host_bandwidth_bytes_per_s <= 0) {
    return InvalidInput(fmt::format("--offload needs the device's host link (host_bandwidth_bytes_per_s), which '{}' "
                                    "does not give; add it to a device file",
                                    device.name));
  }
  if ((offload_activations || s.offload_optimizer) && device.host_memory_bytes <= 0) {
    return InvalidInput(fmt::format("--offload needs the host memory per device (host_memory_bytes), which '{}' does "
                                    "not give; add it to a device file",
                                    device.name));
  }
  return {};
}

}  // namespace

std::string_view PrecisionName(Precision p) {
  switch (p) {
    case Precision::kFp8: return "fp8";
    case Precision::kMxFp8: return "mxfp8";
    case Precision::kNvFp4: return "nvfp4";
    case Precision::kBf16: break;
  }
  return "bf16";
}
std::string_view PrecisionLabel(Precision p) {
  switch (p) {
    case Precision::kFp8: return "FP8";
    case Precision::kMxFp8: return "MXFP8";
    case Precision::kNvFp4: return "NVFP4";
    case Precision::kBf16: break;
  }
  return "BF16";
}
std::string_view StateDtypeName(StateDtype d) { return d == StateDtype::kBf16 ? "bf16" : "fp32"; }

std::string_view MoeDispatcherName(MoeDispatcher d) { return d == MoeDispatcher::kFlex ? "flex" : "alltoall"; }
std::string_view MoeRoutingName(MoeRouting r) { return r == MoeRouting::kBalanced ? "balanced" : "natural"; }

double MoeImbalance(const TrainingSetup& s) {
  if (s.moe_imbalance > 0) return s.moe_imbalance;
  return s.moe_routing == MoeRouting::kBalanced ? 1.0 : kNaturalRoutingImbalance;
}

namespace {
// The value of `Enum` among `values` whose name is `name`.
template <typename Enum>
std::optional<Enum> ByName(std::string_view name, std::string_view (*name_of)(Enum), std::initializer_list<Enum> values) {
  for (Enum v : values) {
    if (name_of(v) == name) return v;
  }
  return std::nullopt;
}
}  // namespace

std::optional<Precision> ParsePrecision(std::string_view name) {
  return ByName(name, PrecisionName, {Precision::kBf16, Precision::kFp8, Precision::kMxFp8, Precision::kNvFp4});
}
std::optional<StateDtype> ParseStateDtype(std::string_view name) {
  return ByName(name, StateDtypeName, {StateDtype::kFp32, StateDtype::kBf16});
}
std::optional<MoeDispatcher> ParseMoeDispatcher(std::string_view name) {
  return ByName(name, MoeDispatcherName, {MoeDispatcher::kAllToAll, MoeDispatcher::kFlex});
}
std::optional<MoeRouting> ParseMoeRouting(std::string_view name) {
  return ByName(name, MoeRoutingName, {MoeRouting::kNatural, MoeRouting::kBalanced});
}

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
  p.schedule = setup.schedule == ScheduleKind::kOneFOneB && setup.vpp > 1 ? ScheduleKind::kInterleavedOneFOneB
                                                                           : setup.schedule;
  p.micro_batch_group = setup.micro_batch_group;
  p.overlap = setup.overlap_pairs;
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
  // Megatron's Mamba and Gated DeltaNet mixers split their heads (and Mamba's B/C groups) over
  // the tensor-parallel ranks.
  struct Split {
    bool used;
    int count;
    const char* what;
  };
  for (const Split& split : {Split{model.mamba.enabled(), model.mamba.heads, "Mamba-2 heads"},
                             Split{model.mamba.enabled(), model.mamba.groups, "Mamba-2 B/C groups (n_groups)"},
                             Split{model.deltanet.enabled(), model.deltanet.key_heads, "Gated DeltaNet key heads"},
                             Split{model.deltanet.enabled(), model.deltanet.value_heads, "Gated DeltaNet value heads"}}) {
    if (split.used && split.count % s.tp != 0) {
      return InvalidInput(fmt::format("--tp {} does not divide the model's {} {}; use one of {}", s.tp, split.count,
                                      split.what, Divisors(split.count, 64)));
    }
  }
  if (model.ffn % s.tp != 0) {
    return InvalidInput(fmt::format("--tp {} does not divide the MLP size {}; use one of {}", s.tp, model.ffn,
                                    Divisors(model.ffn, 64)));
  }
  if (model.moe.enabled() && model.moe.ffn % s.tp != 0) {
    return InvalidInput(fmt::format("--tp {} does not divide the expert MLP size {}; use one of {}", s.tp,
                                    model.moe.ffn, Divisors(model.moe.ffn, 64)));
  }
  const long model_parallel = static_cast<long>(s.tp) * s.pp * s.cp;
  if (s.devices > 0 && model_parallel * s.dp != s.devices) {
    return InvalidInput(fmt::format("--tp {} x --pp {}{} x --dp {} = {} devices, but --devices is {}; make the product "
                                    "equal the device count (e.g. --dp {})",
                                    s.tp, s.pp, s.cp > 1 ? fmt::format(" x --cp {}", s.cp) : "", s.dp,
                                    model_parallel * s.dp, s.devices,
                                    s.devices % model_parallel == 0 ? std::to_string(s.devices / model_parallel)
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
  const bool interleaved = s.vpp > 1 && TraitsOf(SetupPipeline(s).schedule).micro_batch_groups;
  if (interleaved && m % s.pp != 0 && s.micro_batch_group == 0) {
    return InvalidInput(fmt::format("interleaving (--vpp {}) in Megatron's default groups of --pp {} micro-batches "
                                    "needs the micro-batch count {} (= gbs / (mbs x dp)) to be a multiple of --pp; "
                                    "change --gbs, give --microbatch-group, or use --vpp 1",
                                    s.vpp, s.pp, m));
  }
  const ScheduleTraits& traits = TraitsOf(s.schedule);
  if (s.vpp > 1 && traits.max_chunks == 1 && s.schedule != ScheduleKind::kOneFOneB) {
    return InvalidInput(fmt::format("--schedule {} cannot interleave; use --vpp 1{}", traits.name,
                                    traits.split_backward ? ", or --schedule interleaved-zb" : ""));
  }
  if (m < traits.min_micro_batches_per_rank * s.pp) {
    return InvalidInput(fmt::format("--schedule {} needs at least {} micro-batches per pipeline rank, {} x --pp {} = "
                                    "{}, and gbs / (mbs x dp) = {}; raise --gbs or use --schedule zb-v",
                                    traits.name, traits.min_micro_batches_per_rank, traits.min_micro_batches_per_rank,
                                    s.pp, traits.min_micro_batches_per_rank * s.pp, m));
  }
  if (traits.placement == Placement::kMirror && s.pp % 2 != 0) {
    return InvalidInput(fmt::format("--schedule {} pairs pipeline rank r with rank pp-1-r and needs an even --pp, not "
                                    "{}; or use --schedule dualpipev, which folds the pipeline onto half the ranks",
                                    traits.name, s.pp));
  }
  if (traits.placement == Placement::kMirror && m % 2 != 0) {
    return InvalidInput(fmt::format("--schedule {} feeds half the micro-batches from each end and needs an even count, "
                                    "not gbs / (mbs x dp) = {}; change --gbs",
                                    traits.name, m));
  }
  if (s.vpp < traits.min_chunks && traits.max_chunks > traits.min_chunks) {
    return InvalidInput(fmt::format("--schedule {} runs at least {} model chunks per pipeline rank; use --vpp {} or "
                                    "more",
                                    traits.name, traits.min_chunks, traits.min_chunks));
  }
  if (traits.min_chunks == traits.max_chunks && traits.min_chunks > 1 && s.vpp != traits.min_chunks) {
    return InvalidInput(fmt::format("--schedule {} runs {} model chunks per pipeline rank; use --vpp {}", traits.name,
                                    traits.min_chunks, traits.min_chunks));
  }
  const Pipeline pipeline = SetupPipeline(s);
  const long stages = pipeline.stages();
  if (stages > model.layers + 2) {
    return InvalidInput(fmt::format("--pp {} x --vpp {}{} = {} stages, but the model has only {} layers (embedding, "
                                    "{} decoder layers, head); lower --pp or --vpp",
                                    s.pp, s.vpp, pipeline.Copies() > 1 ? " / 2 copies" : "", stages,
                                    model.layers + 2, model.layers));
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
  if (Status parallel = ValidateNewParallelism(model, device, s); !parallel.ok()) return parallel;
  const Bytes reserved = s.reserved_bytes.value_or(ReservedBytesDefault(device)) + s.headroom_bytes;
  if (reserved >= device.memory_bytes) {
    return InvalidInput(fmt::format("reserved memory and headroom, {} bytes, are not below the device's {} bytes; lower "
                                    "--reserved-gb or --memory-headroom-gb",
                                    reserved, device.memory_bytes));
  }
  if (model.layers + 2 > kMaxLayers) {
    return InvalidInput(fmt::format("the model has {} decoder layers; with the embedding and the head bmpipe plans at "
                                    "most {} layers",
                                    model.layers, kMaxLayers));
  }
  // The pipeline's own limits (problem.h: sizes, ops of the schedule).
  if (Status valid = ValidatePipeline(pipeline, model.layers + 2); !valid.ok()) return valid;
  if (s.recompute.empty()) return InvalidInput("--recompute needs at least one option, e.g. none");
  for (const std::string& option : s.recompute) {
    Result<Recompute> parsed = ParseRecompute(option);
    if (!parsed.ok()) return InvalidInput("--recompute: " + parsed.error().message);
  }
  return {};
}

TrainingInfo SetupTrainingInfo(const ModelSpec& model, const TrainingSetup& setup) {
  TrainingInfo training;
  training.model = model.name;
  training.tensor_parallel = setup.tp;
  training.data_parallel = setup.dp;
  training.micro_batch_size = setup.micro_batch_size;
  training.global_batch_size = setup.global_batch_size;
  training.seq_length = setup.seq;
  training.headroom_bytes = setup.headroom_bytes;
  training.mtp_layers = model.mtp_layers;
  training.sequence_parallel = setup.sequence_parallel;
  training.distributed_optimizer = ZeroStage(setup) >= 1;
  training.flash_attention = setup.flash_attention;
  training.overlap_grad_reduce = setup.dp_overlap > 0;
  training.context_parallel = setup.cp;
  training.expert_parallel = setup.ep;
  training.expert_tensor_parallel = setup.etp > 0 && setup.etp != setup.tp ? setup.etp : 0;
  training.zero_stage = ZeroStage(setup);
  training.precision = std::string(PrecisionName(setup.precision));
  training.fp8_params = setup.fp8_params;
  training.no_fp8_transpose_cache = setup.no_fp8_transpose_cache;
  if (setup.precision == Precision::kFp8) training.fp8_recipe = setup.fp8_recipe;
  training.grad_dtype = std::string(StateDtypeName(setup.grad_dtype));
  training.optimizer_dtype = std::string(StateDtypeName(setup.optimizer_dtype));
  // An overlap of collectives a run does not have (TP 1, EP 1) is not part of it.
  training.tp_comm_overlap = setup.tp_comm_overlap > 0 && setup.tp > 1;
  training.offload_optimizer = setup.offload_optimizer;
  training.offload_keeps_master = setup.offload_keeps_master;
  training.offload_modules = setup.offload_modules;
  for (int i = 0; i < model.layers && static_cast<std::size_t>(i) < model.mixers.size(); ++i) {
    const Mixer mixer = model.mixers[i];
    if (mixer == Mixer::kAttention || mixer == Mixer::kNone) continue;
    const std::string name = MixerName(mixer);
    if (std::find(training.linear_mixers.begin(), training.linear_mixers.end(), name) == training.linear_mixers.end()) {
      training.linear_mixers.push_back(name);
    }
  }
  training.not_modeled = model.not_modeled;
  if (model.moe.enabled()) {
    training.moe.experts = model.moe.experts;
    training.moe.top_k = model.moe.top_k;
    training.moe.expert_ffn = model.moe.ffn;
    training.moe.shared_expert_ffn = model.moe.shared_experts * model.moe.ffn;
    for (int i = 0; i < model.layers; ++i) {
      if (!IsMoeLayer(model, i)) training.moe.dense_layers.push_back(i);
    }
    training.moe.capacity_factor = setup.moe_capacity_factor;
    training.moe.dispatcher = std::string(MoeDispatcherName(setup.moe_dispatcher));
    training.moe.comm_overlap = setup.ep_comm_overlap > 0 && setup.ep > 1;
    training.moe.cuda_graphs = setup.moe_cuda_graphs;
  }
  return training;
}

}  // namespace bmpipe

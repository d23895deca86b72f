#include "bmpipe/frameworks/framework.h"

#include <algorithm>

#include <fmt/format.h>

#include "bmpipe/core/json_cursor.h"
#include "bmpipe/frameworks/deepspeed/deepspeed.h"
#include "bmpipe/frameworks/megatron/megatron.h"
#include "bmpipe/frameworks/mindformers/mindformers.h"
#include "bmpipe/frameworks/settings.h"
#include "bmpipe/frameworks/torch/torch.h"
#include "bmpipe/frameworks/torchtitan/torchtitan.h"

namespace bmpipe {
namespace {

constexpr ScheduleSet kOneFOneBFamily =
    ScheduleBit(ScheduleKind::kOneFOneB) | ScheduleBit(ScheduleKind::kInterleavedOneFOneB);

constexpr ScheduleSet Schedules(std::initializer_list<ScheduleKind> kinds) {
  ScheduleSet set = 0;
  for (ScheduleKind k : kinds) set |= ScheduleBit(k);
  return set;
}

// What torch.distributed.pipelining's schedule runtime runs from the exported CSV: every schedule
// whose stages sit on one rank each (tests/framework_checks/test_torchtitan.py runs each CSV in
// torch's runtime; python/tests/test_torch.py trains plans of 1F1B and interleaved 1F1B).
constexpr ScheduleSet kTorchSchedules =
    Schedules({ScheduleKind::kGPipe, ScheduleKind::kOneFOneB, ScheduleKind::kInterleavedOneFOneB,
               ScheduleKind::kZeroBubbleH1, ScheduleKind::kZeroBubbleH2, ScheduleKind::kZeroBubbleV,
               ScheduleKind::kInterleavedZeroBubble, ScheduleKind::kDualPipeV});
// What torchtitan's --parallelism.pipeline_parallel_schedule takes: the schedules torch names a
// class for (ScheduleTraits::torch_class).
constexpr ScheduleSet kTorchTitanSchedules =
    Schedules({ScheduleKind::kGPipe, ScheduleKind::kOneFOneB, ScheduleKind::kInterleavedOneFOneB,
               ScheduleKind::kZeroBubbleV, ScheduleKind::kInterleavedZeroBubble, ScheduleKind::kDualPipeV});

constexpr SetupFeatures Features(std::initializer_list<SetupFeature> features) {
  SetupFeatures set = 0;
  for (SetupFeature f : features) set |= FeatureBit(f);
  return set;
}

// The setup features each framework runs: explicit lists, so that a feature added to the setup is
// run by none until its row lists it (and refused, naming it, until then).
using F = SetupFeature;
constexpr SetupFeatures kFeaturesOfMoe = Features({F::kMoe, F::kMoeFlexDispatcher, F::kMoeCapacity, F::kMoeCommOverlap});
// torch and MindFormers: the exports carry the pipeline and the recomputation; the model's own code
// (and MindFormers' configuration) set up the rest.
constexpr SetupFeatures kMindFormersSetups =
    Features({F::kContextParallel, F::kExpertParallel, F::kShardedGradients, F::kFp8, F::kFp8Params,
              F::kNoFp8TransposeCache, F::kBf16Grads, F::kBf16Moments, F::kTpCommOverlap, F::kOffloadOptimizer,
              F::kOffloadKeepsMaster, F::kMoeCudaGraphs}) |
    kFeaturesOfMoe;
// torch pipelining runs whatever layers the model's own code has, hybrid stacks too.
constexpr SetupFeatures kTorchSetups = kMindFormersSetups | Features({F::kLinearMixers});
constexpr SetupFeatures kMegatronSetups =
    Features({F::kContextParallel, F::kExpertParallel, F::kShardedGradients, F::kFp8, F::kFp8Params,
              F::kNoFp8TransposeCache, F::kBf16Grads, F::kBf16Moments, F::kTpCommOverlap, F::kOffloadOptimizer,
              F::kMoeCudaGraphs}) |
    kFeaturesOfMoe;
constexpr SetupFeatures kMegatronLocalSetups =
    Features({F::kExpertParallel, F::kShardedGradients, F::kFp8Params, F::kNoFp8TransposeCache, F::kBf16Grads,
              F::kBf16Moments, F::kOffloadOptimizer}) |
    kFeaturesOfMoe;
constexpr SetupFeatures kDeepSpeedSetups =
    Features({F::kFp8Params, F::kNoFp8TransposeCache, F::kBf16Grads, F::kOffloadOptimizer, F::kMoeCudaGraphs}) |
    kFeaturesOfMoe;
constexpr SetupFeatures kTorchTitanSetups =
    Features({F::kContextParallel, F::kShardedGradients, F::kFp8Params, F::kNoFp8TransposeCache,
              F::kOffloadKeepsMaster, F::kMoeCudaGraphs}) |
    kFeaturesOfMoe;

// What Megatron-LM's two layer specs refuse, and why. The local spec runs without Transformer
// Engine, so neither its FP8 GEMMs nor its attention, overlaps and graphs.
const std::vector<Refusal>& MegatronRefusals(bool local) {
  static const std::vector<Refusal> te = {
      {SetupFeature::kOffloadKeepsMaster,
       "training.offload_keeps_master: Megatron-LM takes --optimizer-cpu-offload only with "
       "--use-precision-aware-optimizer, whose offload moves the fp32 master weights to the host too; use --offload "
       "optimizer"},
      {SetupFeature::kLinearMixers,
       "training.linear_mixers = {}: Megatron-LM runs hybrid stacks in its MambaModel (--hybrid-override-pattern, or "
       "GPTModel's experimental Gated DeltaNet attention variant), whose flags and stage split the export does not "
       "write yet; plan with --target any"},
  };
  static const std::vector<Refusal> spec_local = {
      {SetupFeature::kFp8,
       "training.precision = {}: FP8 and FP4 GEMMs run in Transformer Engine's modules, which the local layer spec does not "
       "use; use --target megatron or --precision bf16"},
      {SetupFeature::kContextParallel,
       "training.context_parallel = {}: the local layer spec's attention asserts \"Context parallelism is only "
       "supported by TEDotProductAttention!\"; use --target megatron or --cp 1"},
      te[0],
      te[1],
      {SetupFeature::kMoeCudaGraphs,
       "training.moe.cuda_graphs: Megatron captures them with Transformer Engine's make_graphed_callables (\"CUDA "
       "Graphs are not supported without TE.\"), which the local layer spec's runs go without; use --target megatron, "
       "or drop --moe-cuda-graphs"},
      {SetupFeature::kTpCommOverlap,
       "training.tp_comm_overlap: the overlap runs in Transformer Engine's modules, which the local layer spec does "
       "not use; use --target megatron or --tp-comm-overlap 0"},
  };
  return local ? spec_local : te;
}

// Hybrid stacks: the exports of these frameworks name transformer layers only.
constexpr std::string_view kNoLinearMixers =
    "training.linear_mixers = {}: the export names transformer layers only, and the framework's model code has no "
    "Mamba-2 or Gated DeltaNet layers it could place; plan with --target torch (the model's own layers) or any";

const std::vector<Refusal>& MindFormersRefusals() {
  static const std::vector<Refusal> refusals = {{SetupFeature::kLinearMixers, kNoLinearMixers}};
  return refusals;
}

const std::vector<Refusal>& DeepSpeedRefusals() {
  static const std::vector<Refusal> refusals = {
    {SetupFeature::kShardedGradients,
     "training.zero_stage = {}: DeepSpeed's PipelineEngine refuses ZeRO stage 2 and 3 (\"ZeRO-2 and ZeRO-3 are "
     "incompatible with pipeline parallelism\"); use --zero 1 or --zero 0"},
    {SetupFeature::kContextParallel,
     "training.context_parallel = {}: DeepSpeed's pipeline engine splits no sequence (its Ulysses sequence "
     "parallelism is not part of PipelineModule); use --cp 1"},
    {SetupFeature::kExpertParallel,
     "training.expert_parallel = {}: the export's PipelineModule has no expert-parallel layers; use --ep 1, or "
     "--target megatron"},
    {SetupFeature::kFp8,
     "training.precision = {}: DeepSpeed's pipeline engine trains in bf16 (no FP8 or FP4 GEMMs); use --precision bf16, or "
     "--target megatron"},
    {SetupFeature::kTpCommOverlap,
     "training.tp_comm_overlap: DeepSpeed does not overlap tensor-parallel collectives with GEMMs; use "
     "--tp-comm-overlap 0"},
    {SetupFeature::kBf16Moments,
     "training.optimizer_dtype = bf16: DeepSpeed keeps bf16 moments only with bf16 master weights "
     "(bf16_optimizer_states needs bf16_master_weights_and_grads), which bmpipe's cost model does not describe (its "
     "master weights stay fp32); use --optimizer-dtype fp32"},
    {SetupFeature::kOffloadKeepsMaster,
     "training.offload_keeps_master: DeepSpeed's offload_optimizer moves the fp32 master weights to the host with the "
     "moments; use --offload optimizer"},
    {SetupFeature::kLinearMixers, kNoLinearMixers},
  };
  return refusals;
}

constexpr std::string_view kTorchTitanBf16State =
    "training.grad_dtype/optimizer_dtype = bf16: torchtitan's FSDP reduces gradients in fp32 (mixed_precision_reduce "
    "takes only float32) and keeps fp32 optimizer state, and --training.dtype bfloat16 would drop the fp32 master "
    "weights too; use --grad-dtype fp32 --optimizer-dtype fp32";

const std::vector<Refusal>& TorchTitanRefusals() {
  static const std::vector<Refusal> refusals = {
    {SetupFeature::kExpertParallel,
     "training.expert_parallel = {}: the torchtitan export names only the Llama 3 configurations (dense models); use "
     "--ep 1, or --target megatron"},
    {SetupFeature::kFp8,
     "training.precision = {}: torchtitan 0.3.0 turns float8 on in a configuration function's model converters "
     "(Float8LinearConverter), which no argument sets and the Llama 3 8B and 70B configurations lack; use --precision "
     "bf16"},
    {SetupFeature::kBf16Grads, kTorchTitanBf16State},
    {SetupFeature::kBf16Moments, kTorchTitanBf16State},
    {SetupFeature::kTpCommOverlap,
     "training.tp_comm_overlap: torchtitan overlaps tensor-parallel collectives only in compiled models (async tensor "
     "parallel under torch.compile), which the export does not configure; use --tp-comm-overlap 0"},
    {SetupFeature::kOffloadOptimizer,
     "training.offload_optimizer: torchtitan's CPU offload moves parameters and gradients to the host too (FSDP's "
     "CPUOffloadPolicy), not the optimizer alone; drop optimizer from --offload"},
    {SetupFeature::kLinearMixers, kNoLinearMixers},
  };
  return refusals;
}

const SetupFeatureInfo kFeatureInfo[] = {
    {SetupFeature::kContextParallel, "training.context_parallel", "context parallelism"},
    {SetupFeature::kExpertParallel, "training.expert_parallel", "expert parallelism"},
    {SetupFeature::kShardedGradients, "training.zero_stage", "ZeRO stage 2 or 3 (sharded gradients)"},
    {SetupFeature::kFp8, "training.precision", "quantized GEMMs (FP8, MXFP8, NVFP4)"},
    {SetupFeature::kFp8Params, "training.fp8_params", "FP8 weights"},
    {SetupFeature::kNoFp8TransposeCache, "training.no_fp8_transpose_cache", "FP8 weights without transpose caches"},
    {SetupFeature::kBf16Grads, "training.grad_dtype", "bf16 main gradients"},
    {SetupFeature::kBf16Moments, "training.optimizer_dtype", "bf16 optimizer moments"},
    {SetupFeature::kTpCommOverlap, "training.tp_comm_overlap", "tensor-parallel communication overlap"},
    {SetupFeature::kOffloadOptimizer, "training.offload_optimizer", "the optimizer on the host"},
    {SetupFeature::kOffloadKeepsMaster, "training.offload_keeps_master", "Adam's moments alone on the host"},
    {SetupFeature::kMoe, "training.moe", "mixture-of-experts layers"},
    {SetupFeature::kMoeFlexDispatcher, "training.moe.dispatcher", "the flex MoE dispatcher"},
    {SetupFeature::kMoeCapacity, "training.moe.capacity_factor", "an MoE capacity factor"},
    {SetupFeature::kMoeCommOverlap, "training.moe.comm_overlap", "the MoE all-to-all overlap"},
    {SetupFeature::kMoeCudaGraphs, "training.moe.cuda_graphs", "CUDA graphs of the MoE router"},
    {SetupFeature::kLinearMixers, "training.linear_mixers", "linear-time mixer layers (a hybrid stack)"},
};
static_assert(std::size(kFeatureInfo) == kSetupFeatures, "a row per SetupFeature");

std::string ScheduleList(ScheduleSet set) {
  std::vector<std::string> names;
  for (const ScheduleTraits& t : kSchedules) {
    if ((set & ScheduleBit(t.kind)) != 0) names.emplace_back(t.name);
  }
  return fmt::format("{}", fmt::join(names, ", "));
}

// What runs a schedule no framework bmpipe exports to runs.
std::string NoFrameworkRuns(ScheduleKind kind) {
  if (kind == ScheduleKind::kDualPipe) return std::string(kNoFrameworkRunsDualPipe);
  return fmt::format("schedule '{}' is run by none of the frameworks bmpipe exports to; plan with --target any for it",
                     ScheduleName(kind));
}

}  // namespace

const SetupFeatureInfo& InfoOf(SetupFeature feature) { return kFeatureInfo[static_cast<int>(feature)]; }

SetupFeatures FeaturesOf(const TrainingInfo& t) {
  SetupFeatures f = 0;
  auto add = [&](bool on, SetupFeature feature) {
    if (on) f |= FeatureBit(feature);
  };
  add(t.context_parallel > 1, SetupFeature::kContextParallel);
  add(t.expert_parallel > 1, SetupFeature::kExpertParallel);
  add(ZeroStage(t) >= 2, SetupFeature::kShardedGradients);
  add(t.precision != "bf16", SetupFeature::kFp8);
  add(t.fp8_params, SetupFeature::kFp8Params);
  add(t.no_fp8_transpose_cache, SetupFeature::kNoFp8TransposeCache);
  add(t.grad_dtype == "bf16", SetupFeature::kBf16Grads);
  add(t.optimizer_dtype == "bf16", SetupFeature::kBf16Moments);
  add(t.tp_comm_overlap, SetupFeature::kTpCommOverlap);
  add(t.offload_optimizer, SetupFeature::kOffloadOptimizer);
  add(t.offload_keeps_master, SetupFeature::kOffloadKeepsMaster);
  add(t.moe.enabled(), SetupFeature::kMoe);
  add(t.moe.enabled() && t.moe.dispatcher == "flex", SetupFeature::kMoeFlexDispatcher);
  add(t.moe.enabled() && t.moe.capacity_factor > 0, SetupFeature::kMoeCapacity);
  add(t.moe.comm_overlap, SetupFeature::kMoeCommOverlap);
  add(t.moe.cuda_graphs, SetupFeature::kMoeCudaGraphs);
  add(!t.linear_mixers.empty(), SetupFeature::kLinearMixers);
  return f;
}

std::string FeatureValue(const TrainingInfo& t, SetupFeature feature) {
  switch (feature) {
    case SetupFeature::kContextParallel:
      return std::to_string(t.context_parallel);
    case SetupFeature::kExpertParallel:
      return std::to_string(t.expert_parallel);
    case SetupFeature::kShardedGradients:
      return std::to_string(ZeroStage(t));
    case SetupFeature::kFp8:
      return t.precision;
    case SetupFeature::kBf16Grads:
      return t.grad_dtype;
    case SetupFeature::kBf16Moments:
      return t.optimizer_dtype;
    case SetupFeature::kMoe:
      return fmt::format("{} experts", t.moe.experts);
    case SetupFeature::kMoeFlexDispatcher:
      return t.moe.dispatcher;
    case SetupFeature::kMoeCapacity:
      return fmt::format("{:g}", t.moe.capacity_factor);
    case SetupFeature::kLinearMixers:
      return fmt::format("{}", fmt::join(t.linear_mixers, ", "));
    default:
      return "true";
  }
}

const std::vector<Target>& Targets() {
  static const std::vector<Target> kTargets = {
      {TargetKind::kAny, "any", "bmpipe's per-layer plan: needs a framework that recomputes per layer", std::nullopt,
       RecomputeGranularity::kPerLayer, 0, false, true, kEverySchedule, kEverySetupFeature, {}, {}, AnySettings},
      {TargetKind::kTorch, "torch",
       "torch.distributed.pipelining (PyTorch >= 2.6) with the model's own per-layer checkpointing", FrameworkId::kTorch,
       RecomputeGranularity::kPerLayer, 0, false, true, kTorchSchedules,
       kTorchSetups, {}, {}, TorchSettings},
      {TargetKind::kMegatron, "megatron",
       "Megatron-Core >= 0.13 with its Transformer Engine layer spec (--pipeline-model-parallel-layout)",
       FrameworkId::kMegatron, RecomputeGranularity::kGlobal,
       kRecomputeCoreAttention | kRecomputeMlp | kRecomputeMlaUpProjection, true, true, kOneFOneBFamily,
       kMegatronSetups, MegatronRefusals(false), {"selective+mlp"}, MegatronSettings, nullptr, MegatronRules},
      {TargetKind::kMegatronLocal, "megatron-local",
       "Megatron-Core >= 0.13 with its local layer spec (--pipeline-model-parallel-layout)", FrameworkId::kMegatron,
       RecomputeGranularity::kGlobal,
       kRecomputeCoreAttention | kRecomputeMlp | kRecomputeNorms | kRecomputeMlaUpProjection, true, true,
       kOneFOneBFamily, kMegatronLocalSetups, MegatronRefusals(true),
       {"selective+mlp", "selective+norm", "mlp+norm", "selective+mlp+norm"}, MegatronSettings, nullptr, MegatronRules},
      {TargetKind::kMindFormers, "mindformers", "MindFormers >= 1.3 (offset and recompute lists per stage)",
       FrameworkId::kMindFormers, RecomputeGranularity::kPerStage, 0, false, false, kOneFOneBFamily,
       kMindFormersSetups, MindFormersRefusals(), {"mlp_act", "mlp_act+norm"}, MindFormersSettings,
       MindFormersCanonical},
      {TargetKind::kDeepSpeed, "deepspeed",
       "DeepSpeed >= 0.14 (a PipelineModule subclass with the plan's parts and checkpointed layers)",
       FrameworkId::kDeepSpeed, RecomputeGranularity::kPerLayer, 0, false, true,
       ScheduleBit(ScheduleKind::kOneFOneB), kDeepSpeedSetups, DeepSpeedRefusals(), {}, DeepSpeedSettings, nullptr,
       DeepSpeedRules},
      {TargetKind::kTorchTitan, "torchtitan", "torchtitan >= 0.2 (module_fqns_per_model_part, schedule CSV)",
       FrameworkId::kTorchTitan, RecomputeGranularity::kGlobal, 0, false, true, kTorchTitanSchedules,
       kTorchTitanSetups, TorchTitanRefusals(), {}, TorchTitanSettings},
  };
  return kTargets;
}

bool Target::Interleaves() const {
  for (const ScheduleTraits& t : kSchedules) {
    if (Runs(t.kind) && t.max_chunks > 1) return true;
  }
  return false;
}

const Target& TargetOf(TargetKind kind) {
  for (const Target& t : Targets()) {
    if (t.kind == kind) return t;
  }
  return Targets().front();
}

std::vector<std::string> TargetNames() {
  std::vector<std::string> names;
  for (const Target& t : Targets()) names.emplace_back(t.name);
  return names;
}

Result<TargetKind> ParseTarget(const std::string& name) {
  for (const Target& t : Targets()) {
    if (t.name == name) return t.kind;
  }
  const std::vector<std::string> names = TargetNames();
  return InvalidInput(fmt::format("--target {}: unknown target{}; targets: {}", name, DidYouMean(name, names),
                                  fmt::join(names, ", ")));
}

std::string TargetHelp(const std::string& lead) {
  std::string help = lead;
  for (const Target& t : Targets()) help += fmt::format("\n  {}: {}", t.name, t.framework);
  return help;
}

Status TargetRunsPipeline(TargetKind kind, const Pipeline& pipeline) {
  const Target& target = TargetOf(kind);
  const ScheduleKind schedule = pipeline.schedule;
  if (target.Runs(schedule) && pipeline.overlap && target.runs_on) {
    // Overlapped pairs: Megatron's combined 1F1B (--overlap-moe-expert-parallel-comm) is the one a
    // framework's configuration turns on.
    const bool megatron = kind == TargetKind::kMegatron || kind == TargetKind::kMegatronLocal;
    if (!megatron || schedule != ScheduleKind::kInterleavedOneFOneB) {
      return InvalidInput(fmt::format(
          "target {} ({}): pipeline.overlap (--overlap-pairs) under schedule '{}': the framework runs a pair's "
          "forward and backward one after the other unless the model's own code overlaps them, which no export "
          "carries; overlapped pairs are Megatron's combined 1F1B (--target megatron with interleaved 1F1B, "
          "--overlap-moe-expert-parallel-comm); plan without --overlap-pairs, or with --target any",
          target.name, target.framework, ScheduleName(schedule)));
    }
  }
  if (target.Runs(schedule)) return {};
  if (pipeline.chunks > 1 && !target.Interleaves()) {
    return InvalidInput(fmt::format("target {} ({}) has no interleaved schedule; plan with one chunk per rank "
                                    "(--vpp 1, or pipeline.chunks: 1)",
                                    target.name, target.framework));
  }
  std::vector<std::string> others;
  for (const Target& t : Targets()) {
    if (t.runs_on && t.Runs(schedule)) others.emplace_back(t.name);
  }
  if (others.empty()) return InvalidInput(fmt::format("target {} ({}): {}", target.name, target.framework, NoFrameworkRuns(schedule)));
  return InvalidInput(fmt::format("target {} ({}) does not run schedule '{}': it runs {}; plan with one of those, or "
                                  "for a framework that runs '{}': --target {}",
                                  target.name, target.framework, ScheduleName(schedule), ScheduleList(target.schedules),
                                  ScheduleName(schedule), fmt::join(others, ", ")));
}

Status TargetRunsSetup(TargetKind kind, const TrainingInfo& t, const Pipeline* pipeline) {
  const Target& target = TargetOf(kind);
  const SetupFeatures refused = FeaturesOf(t) & ~target.setups;
  if (refused != 0) {
    // The framework's own reasons first, in its order; then any feature it does not list.
    for (const Refusal& r : target.refusals) {
      if ((refused & FeatureBit(r.feature)) == 0) continue;
      return InvalidInput(fmt::format("target {} ({}): {}", target.name, target.framework,
                                      fmt::format(fmt::runtime(r.why), FeatureValue(t, r.feature))));
    }
    for (int f = 0; f < kSetupFeatures; ++f) {
      const SetupFeature feature = static_cast<SetupFeature>(f);
      if ((refused & FeatureBit(feature)) == 0) continue;
      std::vector<std::string> runners;
      for (const Target& other : Targets()) {
        if (other.runs_on && (other.setups & FeatureBit(feature)) != 0) runners.emplace_back(other.name);
      }
      return InvalidInput(fmt::format("target {} ({}): {} = {}: {} is not a setup it runs; drop it, or plan with "
                                      "--target {}",
                                      target.name, target.framework, InfoOf(feature).key, FeatureValue(t, feature),
                                      InfoOf(feature).what, runners.empty() ? "any" : fmt::format("{}", fmt::join(runners, ", "))));
    }
  }
  return target.rules ? target.rules(target, t, pipeline) : Status{};
}

std::vector<std::string> TargetRecomputeOptions(TargetKind kind) {
  const Target& target = TargetOf(kind);
  return {target.recompute_options.begin(), target.recompute_options.end()};
}

void AddTargetRecomputeOptions(const std::vector<TargetKind>& targets, std::vector<std::string>& options) {
  for (TargetKind t : targets) {
    for (const std::string& o : TargetRecomputeOptions(t)) {
      if (std::find(options.begin(), options.end(), o) == options.end()) options.push_back(o);
    }
  }
}

const std::vector<Framework>& Frameworks() {
  static const std::vector<Framework> kFrameworks = {
      {FrameworkId::kMegatron, "megatron",
       "pipeline layout and flags; the closest global recomputation setting and the per-layer list",
       TargetKind::kMegatron, ExportMegatron, ReadMegatron, "", DetectMegatron, 4, ReadMegatronSetup},
      {FrameworkId::kMindFormers, "mindformers", "offset and recompute lists", TargetKind::kMindFormers,
       ExportMindFormers, ReadMindFormers, "", DetectMindFormers, 5},
      {FrameworkId::kDeepSpeed, "deepspeed", "parts and checkpointing", TargetKind::kDeepSpeed, ExportDeepSpeed,
       ReadDeepSpeed, "", DetectDeepSpeed, 3},
      {FrameworkId::kTorchTitan, "torchtitan", "module names per stage, schedule", TargetKind::kTorchTitan,
       ExportTorchTitan, ReadTorchTitan, "", DetectTorchTitan, 2, ReadTorchTitanSetup},
      {FrameworkId::kTorch, "csv",
       "torch pipelining schedule: one row of <stage><F|B|I|W><micro-batch> actions per rank; I and W with a split "
       "backward",
       TargetKind::kTorch, ExportTorchCsv, nullptr, kScheduleCsvFixesNoPlan, DetectTorchCsv, 1},
  };
  return kFrameworks;
}

const Framework& FrameworkOf(FrameworkId id) {
  for (const Framework& f : Frameworks()) {
    if (f.id == id) return f;
  }
  return Frameworks().front();
}

std::vector<std::string> FormatNames() {
  std::vector<std::string> names;
  for (const Framework& f : Frameworks()) names.emplace_back(f.format);
  return names;
}

Result<FrameworkId> ParseFormat(const std::string& name) {
  for (const Framework& f : Frameworks()) {
    if (f.format == name) return f.id;
  }
  const std::vector<std::string> names = FormatNames();
  return InvalidInput(fmt::format("unknown export format '{}'{}; formats: {}", name, DidYouMean(name, names),
                                  fmt::join(names, ", ")));
}

std::optional<FrameworkId> ReadBackFormat(TargetKind kind) {
  const std::optional<FrameworkId> f = TargetOf(kind).runs_on;
  return f && FrameworkOf(*f).read ? f : std::nullopt;
}

TargetKind DefaultTarget(FrameworkId format) { return FrameworkOf(format).target; }

std::string FormatsWithWhatTheyHold() {
  std::vector<std::string> parts;
  for (const Framework& f : Frameworks()) parts.push_back(fmt::format("{} ({})", f.format, f.writes));
  return fmt::format("{}", fmt::join(parts, ", "));
}

}  // namespace bmpipe

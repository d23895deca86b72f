#include "bmpipe/target/target.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>

#include <fmt/format.h>

#include "bmpipe/core/json_cursor.h"
#include "bmpipe/problem/layer_roles.h"
#include "bmpipe/sim/simulator.h"

namespace bmpipe {
namespace {

constexpr unsigned kMindFormersSelect = kRecomputeMlpActivation;
constexpr unsigned kMindFormersComm = kRecomputeNorms;

// The options of `layer` whose meaning `keep` accepts, as a mask.
std::uint16_t Mask(const Layer& layer, const std::function<bool(Recompute)>& keep) {
  std::uint16_t mask = 0;
  for (OptionIdx o = 0; o < static_cast<OptionIdx>(layer.options.size()); ++o) {
    const Result<Recompute> meaning = ParseRecompute(layer.options[o].name);
    if (meaning.ok() && keep(meaning.value())) mask |= static_cast<std::uint16_t>(1u << o);
  }
  return mask;
}

std::uint16_t Only(OptionIdx o) { return static_cast<std::uint16_t>(1u << o); }

// Megatron's module names for `parts` on the problem's decoder layers: its `mlp` is the dense MLP
// and its `moe` the MoE block, so the MLP of a MoE model's layers takes the names of the kinds it
// has.
std::string ModuleNames(const Problem& problem, unsigned parts, TargetKind kind) {
  std::vector<std::string> names;
  if (parts & kRecomputeCoreAttention) names.push_back("core_attn");
  if (parts & kRecomputeMlp) {
    const bool moe = problem.training && problem.training->moe.enabled();
    if (!moe || !problem.training->moe.dense_layers.empty()) names.push_back("mlp");
    if (moe) names.push_back("moe");
  }
  if (parts & kRecomputeNorms) names.push_back(kind == TargetKind::kMindFormers ? "select_comm" : "layernorm");
  if (parts & kRecomputeMlaUpProjection) names.push_back("mla_up_proj");
  return fmt::format("{}", fmt::join(names, " "));
}

// Global settings: every decoder layer takes the option meaning `recompute`; nullopt when some
// decoder layer has none.
std::optional<TargetSetting> Uniform(const Problem& problem, const ModelShape& shape, Recompute recompute,
                                     std::string flags) {
  TargetSetting setting{std::move(flags), {}};
  std::vector<std::uint16_t> family(problem.num_layers());
  for (LayerIdx l = 0; l < problem.num_layers(); ++l) {
    const bool body = l >= shape.body_begin && l < shape.body_end;
    const OptionIdx o = body ? FindRecompute(problem.layers[l], recompute) : NoneOption(problem.layers[l]);
    if (o < 0) return std::nullopt;
    family[l] = Only(o);
  }
  setting.space.families.push_back(std::move(family));
  return setting;
}

// MindFormers' order within a stage, from its first layer: full (0), select and comm together (1),
// one of them (2), none (3); -1 for an option it has no list for.
int MindFormersRank(const Layer& layer, OptionIdx o) {
  const Result<Recompute> r = ParseRecompute(layer.options[o].name);
  if (!r.ok()) return -1;
  if (r.value().none()) return 3;
  if (r.value().full()) return 0;
  if (r.value().parts == (kMindFormersSelect | kMindFormersComm)) return 1;
  if (r.value().parts == kMindFormersSelect || r.value().parts == kMindFormersComm) return 2;
  return -1;
}

Status CheckPipeline(const Target& target, const Pipeline& pipeline) {
  if (pipeline.Copies() > 1 && target.kind != TargetKind::kAny) {
    return InvalidInput(fmt::format("target {} ({}): {}", target.name, target.framework, kNoFrameworkRunsDualPipe));
  }
  if (pipeline.chunks > 1 && !target.interleaving) {
    return InvalidInput(fmt::format("target {} ({}) has no interleaved schedule; plan with one chunk per rank "
                                    "(--vpp 1, or pipeline.chunks: 1)",
                                    target.name, target.framework));
  }
  // Split backwards run in torch.distributed.pipelining's schedule runtime (I and W actions of the
  // exported CSV); torchtitan runs those torch names a schedule class for (ZBVZeroBubble places the
  // stages in a V); Megatron-LM, MindFormers and DeepSpeed have none.
  if (pipeline.SplitBackward() && target.kind == TargetKind::kTorchTitan &&
      TraitsOf(pipeline.schedule).torch_class.empty()) {
    return InvalidInput(fmt::format("target {} ({}) runs a split-backward schedule only where torch names a schedule "
                                    "class for it ({}), not '{}'; plan with one of those, or with --target torch "
                                    "(torch.distributed.pipelining runs the exported CSV)",
                                    target.name, target.framework, TorchScheduleClasses(),
                                    ScheduleName(pipeline.schedule)));
  }
  if (pipeline.SplitBackward() && target.kind != TargetKind::kAny && target.kind != TargetKind::kTorch &&
      target.kind != TargetKind::kTorchTitan) {
    return InvalidInput(fmt::format("target {} ({}) runs no split-backward schedule such as '{}'; plan with "
                                    "schedule 1f1b, or with --target torch (torch.distributed.pipelining runs the "
                                    "exported CSV)",
                                    target.name, target.framework, ScheduleName(pipeline.schedule)));
  }
  if (pipeline.schedule == ScheduleKind::kGPipe && !target.gpipe) {
    return InvalidInput(fmt::format("target {} ({}) runs no GPipe schedule; plan with schedule 1f1b", target.name,
                                    target.framework));
  }
  return {};
}

}  // namespace

const std::vector<Target>& AllTargets() {
  static const std::vector<Target> kTargets = {
      {TargetKind::kAny, "any", "bmpipe's per-layer plan: needs a framework that recomputes per layer",
       RecomputeGranularity::kPerLayer, 0, false, true, true, true, ""},
      {TargetKind::kTorch, "torch",
       "torch.distributed.pipelining (PyTorch >= 2.6) with the model's own per-layer checkpointing",
       RecomputeGranularity::kPerLayer, 0, false, true, true, true, "options without a known meaning"},
      {TargetKind::kMegatron, "megatron",
       "Megatron-Core >= 0.13 with its Transformer Engine layer spec (--pipeline-model-parallel-layout)",
       RecomputeGranularity::kGlobal, kRecomputeCoreAttention | kRecomputeMlp | kRecomputeMlaUpProjection, true, true,
       false, true,
       "per-stage or per-layer recomputation, layernorm recomputation (fused into the linear layers), attn"},
      {TargetKind::kMegatronLocal, "megatron-local",
       "Megatron-Core >= 0.13 with its local layer spec (--pipeline-model-parallel-layout)",
       RecomputeGranularity::kGlobal, kRecomputeCoreAttention | kRecomputeMlp | kRecomputeNorms | kRecomputeMlaUpProjection,
       true, true, false, true, "per-stage or per-layer recomputation, attn"},
      {TargetKind::kMindFormers, "mindformers", "MindFormers >= 1.3 (offset and recompute lists per stage)",
       RecomputeGranularity::kPerStage, 0, false, true, false, false,
       "stages without a decoder layer; a stage with both select-only and comm-only layers; mlp, attn"},
      {TargetKind::kDeepSpeed, "deepspeed",
       "DeepSpeed >= 0.14 (a PipelineModule subclass with the plan's parts and checkpointed layers)",
       RecomputeGranularity::kPerLayer, 0, false, false, false, true,
       "selective (sub-layer) recomputation, interleaving"},
      {TargetKind::kTorchTitan, "torchtitan", "torchtitan >= 0.2 (module_fqns_per_model_part, schedule CSV)",
       RecomputeGranularity::kGlobal, 0, false, true, true, true,
       "per-stage or per-layer recomputation, selective recomputation"},
  };
  return kTargets;
}

const Target& TargetOf(TargetKind kind) {
  for (const Target& t : AllTargets()) {
    if (t.kind == kind) return t;
  }
  return AllTargets().front();
}

std::vector<std::string> TargetNames() {
  std::vector<std::string> names;
  for (const Target& t : AllTargets()) names.emplace_back(t.name);
  return names;
}

Result<TargetKind> ParseTarget(const std::string& name) {
  for (const Target& t : AllTargets()) {
    if (t.name == name) return t.kind;
  }
  const std::vector<std::string> names = TargetNames();
  return InvalidInput(fmt::format("--target {}: unknown target{}; targets: {}", name, DidYouMean(name, names),
                                  fmt::join(names, ", ")));
}

Status TargetRunsSetup(TargetKind kind, const TrainingInfo& t, const Pipeline* pipeline) {
  const Target& target = TargetOf(kind);
  auto refuse = [&](const std::string& why) {
    return InvalidInput(fmt::format("target {} ({}): {}", target.name, target.framework, why));
  };
  const bool bf16_state = t.grad_dtype == "bf16" || t.optimizer_dtype == "bf16";
  switch (kind) {
    case TargetKind::kAny:
    case TargetKind::kTorch:
    case TargetKind::kMindFormers:  // its export is the pipeline and recomputation lists only
      return {};
    case TargetKind::kMegatron:
    case TargetKind::kMegatronLocal: {
      const bool local = kind == TargetKind::kMegatronLocal;
      if (local && t.precision == "fp8") {
        return refuse("training.precision = fp8: FP8 GEMMs run in Transformer Engine's modules, which the local layer "
                      "spec does not use; use --target megatron or --precision bf16");
      }
      if (local && t.context_parallel > 1) {
        return refuse(fmt::format("training.context_parallel = {}: the local layer spec's attention asserts \"Context "
                                  "parallelism is only supported by TEDotProductAttention!\"; use --target megatron or "
                                  "--cp 1",
                                  t.context_parallel));
      }
      if (t.moe.comm_overlap && pipeline && pipeline->ranks > 1 && pipeline->chunks == 1) {
        return refuse(fmt::format("training.moe.comm_overlap with {} pipeline ranks and no interleaving: Megatron "
                                  "overlaps the MoE all-to-alls across pipeline ranks only in the interleaved "
                                  "schedule (virtual_pipeline_model_parallel_size must be set); use --vpp > 1 or "
                                  "--ep-comm-overlap 0",
                                  pipeline->ranks));
      }
      if (t.offload_keeps_master) {
        return refuse("training.offload_keeps_master: Megatron-LM takes --optimizer-cpu-offload only with "
                      "--use-precision-aware-optimizer, whose offload moves the fp32 master weights to the host too; "
                      "use --offload optimizer");
      }
      if (t.moe.cuda_graphs && local) {
        return refuse("training.moe.cuda_graphs: Megatron captures them with Transformer Engine's "
                      "make_graphed_callables (\"CUDA Graphs are not supported without TE.\"), which the local layer "
                      "spec's runs go without; use --target megatron, or drop --moe-cuda-graphs");
      }
      if (t.moe.cuda_graphs && t.moe.capacity_factor > 0 && t.moe.dispatcher == "alltoall") {
        return refuse("training.moe.cuda_graphs with training.moe.capacity_factor and the alltoall dispatcher: "
                      "megatron-core asserts \"moe_preprocess cuda graph is not supported when there are DtoH copies "
                      "and synchronizations in the preprocess step\"; use --moe-dispatcher flex, dropless routing "
                      "(--moe-capacity-factor 0), or drop --moe-cuda-graphs");
      }
      if (t.moe.comm_overlap && t.expert_parallel < 2) {
        return refuse("training.moe.comm_overlap with expert_parallel = 1: Megatron overlaps the MoE all-to-alls only "
                      "with expert parallelism (\"overlap_moe_expert_parallel_comm is only supported with expert model "
                      "parallelism\"); use --ep > 1 or --ep-comm-overlap 0");
      }
      if (t.tp_comm_overlap && local) {
        return refuse("training.tp_comm_overlap: the overlap runs in Transformer Engine's modules, which the local layer "
                      "spec does not use; use --target megatron or --tp-comm-overlap 0");
      }
      if (t.tp_comm_overlap && !(t.sequence_parallel && t.tensor_parallel > 1)) {
        return refuse(fmt::format("training.tp_comm_overlap with tensor_parallel = {}{}: Megatron overlaps the "
                                  "tensor-parallel collectives only with sequence parallelism (--tp-comm-overlap needs "
                                  "--sequence-parallel); add --sequence-parallel with --tp > 1, or --tp-comm-overlap 0",
                                  t.tensor_parallel, t.sequence_parallel ? "" : " and no sequence_parallel"));
      }
      // --use-precision-aware-optimizer (bf16 state, and --optimizer-cpu-offload, which needs it)
      // runs only with the distributed optimizer.
      if ((bf16_state || t.offload_optimizer) && ZeroStage(t) < 1) {
        return refuse(fmt::format("{}: Megatron keeps bf16 gradients or moments, and offloads the optimizer, only in "
                                  "its precision-aware distributed optimizer (--use-precision-aware-optimizer needs "
                                  "--use-distributed-optimizer); add --distributed-optimizer (--zero 1)",
                                  t.offload_optimizer ? "training.offload_optimizer" : "training.grad_dtype/optimizer_dtype = bf16"));
      }
      if (t.expert_parallel > 1 && !t.moe.enabled()) {
        return refuse(fmt::format("training.expert_parallel = {} without training.moe: Megatron needs the MoE shape "
                                  "(--num-experts ...); give the problem's `training.moe`, or --ep 1",
                                  t.expert_parallel));
      }
      return {};
    }
    case TargetKind::kDeepSpeed: {
      // The export is a PipelineModule, which DeepSpeed always runs in its PipelineEngine.
      if (ZeroStage(t) >= 2) {
        return refuse(fmt::format("training.zero_stage = {}: DeepSpeed's PipelineEngine refuses ZeRO stage 2 and 3 "
                                  "(\"ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism\"); use --zero 1 or "
                                  "--zero 0",
                                  ZeroStage(t)));
      }
      if (t.context_parallel > 1) {
        return refuse(fmt::format("training.context_parallel = {}: DeepSpeed's pipeline engine splits no sequence "
                                  "(its Ulysses sequence parallelism is not part of PipelineModule); use --cp 1",
                                  t.context_parallel));
      }
      if (t.expert_parallel > 1) {
        return refuse(fmt::format("training.expert_parallel = {}: the export's PipelineModule has no expert-parallel "
                                  "layers; use --ep 1, or --target megatron",
                                  t.expert_parallel));
      }
      if (t.precision == "fp8") {
        return refuse("training.precision = fp8: DeepSpeed's pipeline engine trains in bf16 (no FP8 GEMMs); use "
                      "--precision bf16, or --target megatron");
      }
      if (t.tp_comm_overlap) {
        return refuse("training.tp_comm_overlap: DeepSpeed does not overlap tensor-parallel collectives with GEMMs; use "
                      "--tp-comm-overlap 0");
      }
      if (t.optimizer_dtype == "bf16") {
        return refuse("training.optimizer_dtype = bf16: DeepSpeed keeps bf16 moments only with bf16 master weights "
                      "(bf16_optimizer_states needs bf16_master_weights_and_grads), which bmpipe's cost model does not "
                      "describe (its master weights stay fp32); use --optimizer-dtype fp32");
      }
      if (t.grad_dtype == "fp32" && ZeroStage(t) == 0) {
        return refuse("training.grad_dtype = fp32 with zero_stage 0: without ZeRO, DeepSpeed's bf16 pipeline accumulates "
                      "gradients in bf16 only (bf16 parameters with data_types.grad_accum_dtype fp32 is an unsupported "
                      "mix); add --distributed-optimizer (--zero 1), or --grad-dtype bf16");
      }
      if (t.offload_keeps_master) {
        return refuse("training.offload_keeps_master: DeepSpeed's offload_optimizer moves the fp32 master weights to "
                      "the host with the moments; use --offload optimizer");
      }
      if (t.offload_optimizer && ZeroStage(t) < 1) {
        return refuse("training.offload_optimizer: DeepSpeed offloads the optimizer only under ZeRO "
                      "(zero_optimization.offload_optimizer); add --distributed-optimizer (--zero 1)");
      }
      return {};
    }
    case TargetKind::kTorchTitan: {
      if (t.expert_parallel > 1) {
        return refuse(fmt::format("training.expert_parallel = {}: the torchtitan export names only the Llama 3 "
                                  "configurations (dense models); use --ep 1, or --target megatron",
                                  t.expert_parallel));
      }
      if (t.precision == "fp8") {
        return refuse("training.precision = fp8: torchtitan 0.3.0 turns float8 on in a configuration function's model "
                      "converters (Float8LinearConverter), which no argument sets and the Llama 3 8B and 70B "
                      "configurations lack; use --precision bf16");
      }
      if (bf16_state) {
        return refuse("training.grad_dtype/optimizer_dtype = bf16: torchtitan's FSDP reduces gradients in fp32 "
                      "(mixed_precision_reduce takes only float32) and keeps fp32 optimizer state, and "
                      "--training.dtype bfloat16 would drop the fp32 master weights too; use --grad-dtype fp32 "
                      "--optimizer-dtype fp32");
      }
      if (t.tp_comm_overlap) {
        return refuse("training.tp_comm_overlap: torchtitan overlaps tensor-parallel collectives only in compiled "
                      "models (async tensor parallel under torch.compile), which the export does not configure; use "
                      "--tp-comm-overlap 0");
      }
      if (t.offload_optimizer) {
        return refuse("training.offload_optimizer: torchtitan's CPU offload moves parameters and gradients to the host "
                      "too (FSDP's CPUOffloadPolicy), not the optimizer alone; drop optimizer from --offload");
      }
      return {};
    }
  }
  return {};
}

std::vector<std::string> TargetRecomputeOptions(TargetKind kind) {
  switch (kind) {
    case TargetKind::kMegatron:
      return {"selective+mlp"};
    case TargetKind::kMegatronLocal:
      return {"selective+mlp", "selective+norm", "mlp+norm", "selective+mlp+norm"};
    case TargetKind::kMindFormers:
      return {"mlp_act", "mlp_act+norm"};
    default:
      return {};
  }
}

void AddTargetRecomputeOptions(const std::vector<TargetKind>& targets, std::vector<std::string>& options) {
  for (TargetKind t : targets) {
    for (const std::string& o : TargetRecomputeOptions(t)) {
      if (std::find(options.begin(), options.end(), o) == options.end()) options.push_back(o);
    }
  }
}

Status ForEachTargetSetting(const Problem& problem, TargetKind kind, const std::function<bool(const TargetSetting&)>& fn,
                            int max_block) {
  const Target& target = TargetOf(kind);
  if (Status ok = CheckPipeline(target, problem.pipeline); !ok.ok()) return ok;
  const ModelShape shape = ShapeOf(problem);
  const int n = problem.num_layers();
  auto body = [&](LayerIdx l) { return l >= shape.body_begin && l < shape.body_end; };
  // A family: decoder layers take the options `keep` accepts, the others (and decoder layers
  // without such an option) their NoneOption.
  auto BodyFamily = [&](const std::function<bool(Recompute)>& keep) {
    std::vector<std::uint16_t> family(n);
    for (LayerIdx l = 0; l < n; ++l) {
      const Layer& layer = problem.layers[l];
      family[l] = body(l) ? Mask(layer, keep) : 0;
      if (family[l] == 0) family[l] = Only(NoneOption(layer));
    }
    return family;
  };
  int settings = 0;
  bool more = true;
  auto offer = [&](const TargetSetting& s) {
    ++settings;
    more = more && fn(s);
  };
  switch (target.granularity) {
    case RecomputeGranularity::kPerLayer: {
      TargetSetting setting;
      if (kind == TargetKind::kDeepSpeed) {
        // Whole-layer checkpointing, chosen per layer.
        setting.space.families.push_back(BodyFamily([](Recompute r) { return r.none() || r.full(); }));
      } else if (kind == TargetKind::kTorch) {
        std::vector<std::uint16_t> family(n);
        for (LayerIdx l = 0; l < n; ++l) {
          family[l] = Mask(problem.layers[l], [](Recompute) { return true; });
          if (family[l] == 0) {
            return InvalidInput(fmt::format("target torch: layer {} ('{}') has no option with a known meaning ({}); "
                                            "name its options by what they recompute, or use --target any",
                                            l, problem.layers[l].name, fmt::join(RecomputeOptionNames(), ", ")));
          }
        }
        setting.space.families.push_back(std::move(family));
      }
      offer(setting);
      break;
    }
    case RecomputeGranularity::kPerStage: {
      // MindFormers: full first, then select and comm together, then one of them: a stage has
      // select-only layers or comm-only layers, not both.
      TargetSetting setting;
      for (const unsigned one : {kMindFormersSelect, kMindFormersComm}) {
        setting.space.families.push_back(BodyFamily([&](Recompute r) {
          return r.none() || r.full() || r.parts == one || r.parts == (kMindFormersSelect | kMindFormersComm);
        }));
      }
      setting.space.needs_one_of.assign(n, false);
      setting.space.order.assign(n, {});
      for (LayerIdx l = 0; l < n; ++l) {
        for (OptionIdx o = 0; o < static_cast<OptionIdx>(problem.layers[l].options.size()); ++o) {
          setting.space.order[l].push_back(static_cast<std::int8_t>(body(l) ? MindFormersRank(problem.layers[l], o) : -1));
        }
      }
      for (LayerIdx l = shape.body_begin; l < shape.body_end; ++l) setting.space.needs_one_of[l] = true;
      offer(setting);
      break;
    }
    case RecomputeGranularity::kGlobal: {
      const bool megatron = kind == TargetKind::kMegatron || kind == TargetKind::kMegatronLocal;
      auto add = [&](const std::optional<TargetSetting>& s) {
        if (s && more) offer(*s);
      };
      add(Uniform(problem, shape, Recompute{}, megatron ? "no recomputation" : "activation_checkpoint mode none"));
      // With CUDA graphs of the MoE router, megatron-core asserts "moe recompute is not supported
      // with moe_router CUDA graph", and "full recompute is only supported with full iteration CUDA
      // graph"; it refuses full recomputation with the MoE all-to-all overlap too.
      const bool graphs = megatron && problem.training && problem.training->moe.cuda_graphs;
      const bool full_allowed = !(megatron && problem.training && problem.training->moe.comm_overlap) && !graphs;
      // Selective: every non-empty set of the modules the spec honours (the mlp module is
      // exported as Megatron's moe module on MoE layers).
      const unsigned modules = target.modules;
      for (unsigned set = 1; set <= modules; ++set) {
        if ((set & ~modules) != 0) continue;
        if (graphs && (set & kRecomputeMlp) != 0) continue;
        add(Uniform(problem, shape, Recompute{set},
                    "--recompute-granularity selective --recompute-modules " + ModuleNames(problem, set, kind)));
      }
      if (full_allowed) {
        add(Uniform(problem, shape, Recompute{kRecomputeLayer},
                    megatron ? "--recompute-granularity full --recompute-method uniform --recompute-num-layers 1"
                             : "activation_checkpoint mode full"));
      }
      if (full_allowed && target.block && shape.body() > 1) {
        // Full recomputation of the first N decoder layers of every chunk, for every N a stage can
        // fall short of (a stage holds at most body - (stages - 1) decoder layers, fewer when every
        // stage needs one).
        std::optional<TargetSetting> none = Uniform(problem, shape, Recompute{}, "");
        bool every_full = true;
        std::vector<OptionIdx> full(n, -1);
        for (LayerIdx l = shape.body_begin; l < shape.body_end; ++l) {
          full[l] = FindRecompute(problem.layers[l], Recompute{kRecomputeLayer});
          every_full = every_full && full[l] >= 0;
        }
        if (none && every_full) {
          const int most = std::min(max_block + 1, std::max(1, shape.body() - (target.stage_without_decoder ? 0 : problem.pipeline.stages() - 1)));
          TargetSetting s{"", std::move(none->space)};
          s.space.block_option = std::move(full);
          for (int block = 1; block < most && more; ++block) {
            s.flags = fmt::format("--recompute-granularity full --recompute-method block --recompute-num-layers {}", block);
            s.space.block = block;
            offer(s);
          }
        }
      }
      if (settings == 0) {
        return InvalidInput(fmt::format("target {}: the decoder layers have none of the options its settings need (none, "
                                        "full{}); name the problem's options by what they recompute",
                                        target.name, target.modules != 0 ? ", selective" : ""));
      }
      break;
    }
  }
  return {};
}

namespace {

// The plan with each stage's options in the order the framework places them, for a plan whose
// stages have the right counts: Megatron's block rule applied; MindFormers' order (full, then both
// selective kinds, then one, then none) within each run of identical layers of a stage. Costs
// do not change: only identical layers swap options.
std::optional<Plan> Canonical(const Problem& problem, TargetKind kind, const StageSpace& space, Plan plan) {
  if (space.block >= 0) {
    space.AssignFixed(plan);
    return plan;
  }
  if (kind != TargetKind::kMindFormers) return plan;
  // MindFormers' lists are counts per stage: it gives the stage's first layers full recomputation,
  // the next both selective kinds, then the one kind, then none. The plan it runs from this
  // plan's counts (the same plan when the stage's decoder layers are identical); nullopt when a
  // layer lacks the option its position asks for.
  const ModelShape shape = ShapeOf(problem);
  for (StageIdx s = 0; s < plan.num_stages(); ++s) {
    const LayerIdx begin = std::max(plan.begin(s), shape.body_begin), end = std::min(plan.end(s), shape.body_end);
    std::array<int, 4> count{};
    Recompute one{kMindFormersSelect};
    for (LayerIdx l = begin; l < end; ++l) {
      const OptionIdx o = plan.option[l];
      ++count[std::max(0, MindFormersRank(problem.layers[l], o))];
      const Recompute r = ParseRecompute(problem.layers[l].options[o].name).value();
      if (MindFormersRank(problem.layers[l], o) == 2) one = r;
    }
    const std::array<Recompute, 4> meaning = {Recompute{kRecomputeLayer}, Recompute{kMindFormersSelect | kMindFormersComm},
                                              one, Recompute{}};
    int rank = 0;
    for (LayerIdx l = begin; l < end; ++l) {
      while (count[rank] == 0) ++rank;
      --count[rank];
      const OptionIdx o = FindRecompute(problem.layers[l], meaning[rank]);
      if (o < 0) return std::nullopt;
      plan.option[l] = o;
    }
  }
  return plan;
}

}  // namespace

Result<TargetPlan> PlanForTarget(const Problem& problem, TargetKind kind, const PlannerOptions& options) {
  const auto began = std::chrono::steady_clock::now();
  TargetPlan out;
  out.target = kind;
  PlannerOptions each = options;
  const Deadline own = Deadline::In(options.time_limit_s);
  if (each.time_limit_name.empty()) each.time_limit_name = fmt::format("time limit {:g} s", options.time_limit_s);
  double bound = std::numeric_limits<double>::infinity();
  bool any_plan = false, all_infeasible = true;
  PlannerResult best;
  std::optional<Error> error;
  // Block settings beyond the most decoder layers a stage can hold in memory are full recomputation.
  const int max_block = MostDecodersThatFit(problem);
  // Each setting gets an equal share of the time left, so that a hard one does not starve the rest.
  int total = 0;
  Status counted = ForEachTargetSetting(problem, kind, [&](const TargetSetting&) { return ++total, true; }, max_block);
  if (!counted.ok()) return counted.error();
  Status walked = ForEachTargetSetting(problem, kind, [&](const TargetSetting& setting) {
    const double left = std::min(own.SecondsLeft(), options.deadline.SecondsLeft());
    each.time_limit_s = std::max(0.0, left) / std::max(1, total - out.settings);
    if (out.settings > 0 && (own.Expired() || options.deadline.Expired())) {
      // Settings not planned: nothing is proven about them.
      bound = 0;
      all_infeasible = false;
      if (best.stopped_by.empty()) best.stopped_by = "the time limit (before every recomputation setting was planned)";
      return false;
    }
    each.space = setting.space;
    if (options.progress && total > 1) {
      // The phase names the setting; the best plan is the best over settings so far.
      each.progress = [&, n = out.settings + 1](const Progress& p) {
        Progress q = p;
        q.phase = fmt::format("setting {} of {}: {}", n, total, p.phase);
        if (any_plan) q.best_s = q.best_s < 0 ? ToSeconds(best.iteration_ns) : std::min(q.best_s, ToSeconds(best.iteration_ns));
        q.bound_s = -1;  // a bound over this setting only
        options.progress(q);
      };
    }
    Result<PlannerResult> r = PlanPipeline(problem, each);
    if (!r.ok()) {
      error = r.error();
      return false;
    }
    PlannerResult& p = r.value();
    ++out.settings;
    best.nodes += p.nodes;
    best.lp_solves += p.lp_solves;
    best.cuts += p.cuts;
    best.candidates += p.candidates;
    if (p.status == PlanStatus::kInfeasible) return true;
    all_infeasible = false;
    bound = std::min(bound, p.bound_ns);
    if (!p.stopped_by.empty() && best.stopped_by.empty()) best.stopped_by = p.stopped_by;
    if (p.status == PlanStatus::kNoPlan) return true;
    const std::optional<Plan> canonical = Canonical(problem, kind, setting.space, p.plan);
    const SimResult sim = canonical ? SimulatePlan(problem, *canonical).value() : SimResult{};
    if (!canonical || !sim.fits) {
      // The framework's order on stages of unlike layers runs another plan, which does not fit:
      // nothing found for this setting (the bound still holds).
      if (best.stopped_by.empty()) best.stopped_by = "the framework's layer order within mixed stages";
      return true;
    }
    if (sim.iteration_ns != p.iteration_ns && best.stopped_by.empty()) {
      best.stopped_by = "the framework's layer order within mixed stages (the plan is what it runs, not proven optimal)";
    }
    const TimeNs time = sim.iteration_ns;
    if (!any_plan || time < best.iteration_ns) {
      any_plan = true;
      best.plan = *canonical;
      best.iteration_ns = time;
      best.objective_ns = p.objective_ns;
      best.solver = p.solver;
      best.lp_text = p.lp_text;
      out.setting = setting.flags;
    }
    return true;
  }, max_block);
  if (!walked.ok()) return walked.error();
  if (error) return *error;
  if (all_infeasible) {
    best.status = PlanStatus::kInfeasible;
  } else if (!any_plan) {
    best.status = PlanStatus::kNoPlan;
    best.bound_ns = std::isfinite(bound) ? bound : 0;
  } else {
    best.bound_ns = std::min(bound, static_cast<double>(best.iteration_ns));
    best.gap = (static_cast<double>(best.iteration_ns) - best.bound_ns) / static_cast<double>(best.iteration_ns);
    best.status = best.gap < kOptimalityTolerance ? PlanStatus::kOptimal : PlanStatus::kFeasible;
    if (best.status == PlanStatus::kOptimal) best.stopped_by.clear();
  }
  best.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  out.planner = std::move(best);
  return out;
}

bool TargetRunsPlan(const Problem& problem, const Plan& plan, TargetKind kind) {
  bool runs = false;
  const Status walked = ForEachTargetSetting(
      problem, kind,
      [&](const TargetSetting& setting) {
        runs = setting.space.Contains(plan);
        return !runs;
      },
      MostDecoderLayers(problem, plan));
  return walked.ok() && runs;
}

int MostDecodersThatFit(const Problem& problem) {
  const ModelShape shape = ShapeOf(problem);
  std::vector<Bytes> statics;
  for (LayerIdx l = shape.body_begin; l < shape.body_end; ++l) statics.push_back(problem.layers[l].static_bytes);
  std::sort(statics.begin(), statics.end());
  Bytes used = problem.reserved_bytes;
  int k = 0;
  while (k < static_cast<int>(statics.size()) && used + statics[k] <= problem.memory_bytes) used += statics[k++];
  return k;
}

int MostDecoderLayers(const Problem& problem, const Plan& plan) {
  const ModelShape shape = ShapeOf(problem);
  int most = 0;
  for (StageIdx s = 0; s < plan.num_stages(); ++s) {
    most = std::max(most, std::min(plan.end(s), shape.body_end) - std::max(plan.begin(s), shape.body_begin));
  }
  return most;
}

std::string MegatronLayout(const Problem& problem, const Plan& plan) {
  const ModelShape shape = ShapeOf(problem);
  std::string layout;
  for (StageIdx s = 0; s < plan.num_stages(); ++s) {
    const int decoders = std::max(0, std::min(plan.end(s), shape.body_end) - std::max(plan.begin(s), shape.body_begin));
    // A problem without an embedding or a head layer leaves them out of its costs, not the model.
    std::string stage = plan.begin(s) < shape.body_begin || (s == 0 && shape.body_begin == 0) ? "E" : "";
    if (decoders > 0) stage += decoders == 1 ? "t" : fmt::format("t*{}", decoders);
    if (plan.end(s) > shape.body_end || (s + 1 == plan.num_stages() && shape.body_end == problem.num_layers())) {
      stage += "L";
    }
    layout += (s == 0 ? "" : "|") + stage;
  }
  return layout;
}

}  // namespace bmpipe

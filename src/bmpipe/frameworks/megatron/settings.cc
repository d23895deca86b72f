// What Megatron-LM runs: its recomputation settings as stage spaces, the rules megatron-core
// asserts between training features, and its pipeline layout string.
#include <algorithm>

#include <fmt/format.h>

#include "bmpipe/frameworks/megatron/megatron.h"
#include "bmpipe/frameworks/settings.h"
#include "bmpipe/problem/layer_roles.h"

namespace bmpipe {
namespace {

// Megatron's module names for `parts` on the problem's decoder layers: its `mlp` is the dense MLP
// and its `moe` the MoE block, so the MLP of a MoE model's layers takes the names of the kinds it
// has.
std::string ModuleNames(const Problem& problem, unsigned parts) {
  std::vector<std::string> names;
  if (parts & kRecomputeCoreAttention) names.push_back("core_attn");
  if (parts & kRecomputeMlp) {
    const bool moe = problem.training && problem.training->moe.enabled();
    if (!moe || !problem.training->moe.dense_layers.empty()) names.push_back("mlp");
    if (moe) names.push_back("moe");
  }
  if (parts & kRecomputeNorms) names.push_back("layernorm");
  if (parts & kRecomputeMlaUpProjection) names.push_back("mla_up_proj");
  return fmt::format("{}", fmt::join(names, " "));
}

}  // namespace

Status MegatronSettings(const Problem& problem, const Target& target, const SettingSink& fn, int max_block) {
  const ModelShape shape = ShapeOf(problem);
  const int n = problem.num_layers();
  int settings = 0;
  bool more = true;
  auto add = [&](const std::optional<TargetSetting>& s) {
    if (!s || !more) return;
    ++settings;
    more = fn(*s);
  };
  // Fine-grained activation offloading (megatron-core >= 0.14, Transformer Engine's spec) of the
  // problem's offload modules, on every decoder layer beside a setting without full
  // recomputation (whose checkpoint keeps the layer's input outside every offload region).
  // With the MoE block recomputed megatron-core asserts "Cannot offload ... while recomputing the
  // entire MoE layer" for the modules inside it.
  const std::vector<std::string> offload_modules =
      problem.training && target.kind == TargetKind::kMegatron ? problem.training->offload_modules
                                                                : std::vector<std::string>{};
  auto offloaded = [&](unsigned set, const std::string& flags) {
    if (offload_modules.empty()) return;
    const bool moe_inside = std::any_of(offload_modules.begin(), offload_modules.end(), [](const std::string& m) {
      return m == "expert_fc1" || m == "moe_act";
    });
    const bool moe_model = problem.training && problem.training->moe.enabled();
    if (moe_inside && moe_model && (set & kRecomputeMlp) != 0) return;
    add(UniformSetting(problem, shape, Recompute{set | kOffloadActivations},
                       (flags.empty() ? "" : flags + " ") + "--fine-grained-activation-offloading --offload-modules " +
                           fmt::format("{}", fmt::join(offload_modules, " "))));
  };
  add(UniformSetting(problem, shape, Recompute{}, "no recomputation"));
  offloaded(0, "");
  // With CUDA graphs of the MoE router, megatron-core asserts "moe recompute is not supported
  // with moe_router CUDA graph", and "full recompute is only supported with full iteration CUDA
  // graph"; it refuses full recomputation with the MoE all-to-all overlap too.
  const bool graphs = problem.training && problem.training->moe.cuda_graphs;
  // With the all-to-all overlap (a fraction, or the combined 1F1B's pairs) megatron-core 0.19
  // asserts "disable full recomputation" and "disable moe in recompute_modules".
  const bool a2a_overlap = (problem.training && problem.training->moe.comm_overlap) || problem.pipeline.overlap;
  const bool moe = problem.training && problem.training->moe.enabled();
  const bool full_allowed = !a2a_overlap && !graphs;
  // Selective: every non-empty set of the modules the spec honours (the mlp module is exported as
  // Megatron's moe module on MoE layers).
  const unsigned modules = target.modules;
  for (unsigned set = 1; set <= modules; ++set) {
    if ((set & ~modules) != 0) continue;
    if (graphs && (set & kRecomputeMlp) != 0) continue;
    if (a2a_overlap && moe && (set & kRecomputeMlp) != 0) continue;
    const std::string flags = "--recompute-granularity selective --recompute-modules " + ModuleNames(problem, set);
    add(UniformSetting(problem, shape, Recompute{set}, flags));
    offloaded(set, flags);
  }
  if (full_allowed) {
    add(UniformSetting(problem, shape, Recompute{kRecomputeLayer},
                       "--recompute-granularity full --recompute-method uniform --recompute-num-layers 1"));
  }
  if (full_allowed && target.block && shape.body() > 1) {
    // Full recomputation of the first N decoder layers of every chunk, for every N a stage can
    // fall short of (a stage holds at most body - (stages - 1) decoder layers, fewer when every
    // stage needs one).
    std::optional<TargetSetting> none = UniformSetting(problem, shape, Recompute{}, "");
    bool every_full = true;
    std::vector<OptionIdx> full(n, -1);
    for (LayerIdx l = shape.body_begin; l < shape.body_end; ++l) {
      full[l] = FindRecompute(problem.layers[l], Recompute{kRecomputeLayer});
      every_full = every_full && full[l] >= 0;
    }
    if (none && every_full) {
      const int most = std::min(
          max_block + 1,
          std::max(1, shape.body() - (target.stage_without_decoder ? 0 : problem.pipeline.stages() - 1)));
      TargetSetting s{"", std::move(none->space)};
      s.space.block_option = std::move(full);
      for (int block = 1; block < most && more; ++block) {
        s.flags = fmt::format("--recompute-granularity full --recompute-method block --recompute-num-layers {}", block);
        s.space.block = block;
        ++settings;
        more = fn(s);
      }
    }
  }
  if (settings == 0) return NoSettingFor(target);
  return {};
}

Status MegatronRules(const Target& target, const TrainingInfo& t, const Pipeline* pipeline) {
  auto refuse = [&](const std::string& why) {
    return InvalidInput(fmt::format("target {} ({}): {}", target.name, target.framework, why));
  };
  const bool pairs = pipeline && pipeline->overlap;
  if (pairs && !t.moe.enabled()) {
    return refuse("pipeline.overlap (--overlap-pairs) without MoE layers: Megatron's combined 1F1B "
                  "(--overlap-moe-expert-parallel-comm) overlaps the MoE all-to-alls; drop --overlap-pairs");
  }
  if ((t.moe.comm_overlap || pairs) && t.mtp_layers > 1) {
    return refuse(fmt::format("training.mtp_layers = {} with the MoE all-to-all overlap: megatron-core asserts \"MTP "
                              "supports at most one layer when enabling overlap_moe_expert_parallel_comm\"; use one "
                              "MTP module or drop the overlap",
                              t.mtp_layers));
  }
  if ((pairs || t.moe.comm_overlap) && pipeline && pipeline->ranks > 1 && pipeline->chunks == 1) {
    return refuse(fmt::format("training.moe.comm_overlap with {} pipeline ranks and no interleaving: Megatron "
                              "overlaps the MoE all-to-alls across pipeline ranks only in the interleaved "
                              "schedule (virtual_pipeline_model_parallel_size must be set); use --vpp > 1 or "
                              "--ep-comm-overlap 0",
                              pipeline->ranks));
  }
  if (t.moe.cuda_graphs && t.moe.capacity_factor > 0 && t.moe.dispatcher == "alltoall") {
    return refuse("training.moe.cuda_graphs with training.moe.capacity_factor and the alltoall dispatcher: "
                  "megatron-core asserts \"moe_preprocess cuda graph is not supported when there are DtoH copies "
                  "and synchronizations in the preprocess step\"; use --moe-dispatcher flex, dropless routing "
                  "(--moe-capacity-factor 0), or drop --moe-cuda-graphs");
  }
  if ((t.moe.comm_overlap || pairs) && t.expert_parallel < 2) {
    return refuse("the MoE all-to-all overlap (training.moe.comm_overlap or pipeline.overlap) with expert_parallel = 1: Megatron overlaps the MoE all-to-alls only "
                  "with expert parallelism (\"overlap_moe_expert_parallel_comm is only supported with expert model "
                  "parallelism\"); use --ep > 1 or --ep-comm-overlap 0");
  }
  if (t.tp_comm_overlap && !(t.sequence_parallel && t.tensor_parallel > 1)) {
    return refuse(fmt::format("training.tp_comm_overlap with tensor_parallel = {}{}: Megatron overlaps the "
                              "tensor-parallel collectives only with sequence parallelism (--tp-comm-overlap needs "
                              "--sequence-parallel); add --sequence-parallel with --tp > 1, or --tp-comm-overlap 0",
                              t.tensor_parallel, t.sequence_parallel ? "" : " and no sequence_parallel"));
  }
  // --use-precision-aware-optimizer (bf16 state, and --optimizer-cpu-offload, which needs it)
  // runs only with the distributed optimizer.
  const bool bf16_state = t.grad_dtype == "bf16" || t.optimizer_dtype == "bf16";
  if ((bf16_state || t.offload_optimizer) && ZeroStage(t) < 1) {
    return refuse(fmt::format("{}: Megatron keeps bf16 gradients or moments, and offloads the optimizer, only in "
                              "its precision-aware distributed optimizer (--use-precision-aware-optimizer needs "
                              "--use-distributed-optimizer); add --distributed-optimizer (--zero 1)",
                              t.offload_optimizer ? "training.offload_optimizer" : "training.grad_dtype/optimizer_dtype = bf16"));
  }
  auto offloads = [&](const char* module) {
    return std::find(t.offload_modules.begin(), t.offload_modules.end(), module) != t.offload_modules.end();
  };
  if (offloads("attn_proj") && !offloads("core_attn")) {
    return refuse("training.offload_modules has attn_proj without core_attn: megatron-core asserts \"attn_proj cannot "
                  "be set to offload_modules alone without core_attn\"; add core_attn to --offload-modules");
  }
  if (t.expert_parallel > 1 && !t.moe.enabled()) {
    return refuse(fmt::format("training.expert_parallel = {} without training.moe: Megatron needs the MoE shape "
                              "(--num-experts ...); give the problem's `training.moe`, or --ep 1",
                              t.expert_parallel));
  }
  return {};
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
      // The multi-token-prediction modules, which the problem runs in its head layer, before the loss.
      const int mtp = problem.training ? problem.training->mtp_layers : 0;
      if (mtp > 0) stage += mtp == 1 ? "m" : fmt::format("m*{}", mtp);
      stage += "L";
    }
    layout += (s == 0 ? "" : "|") + stage;
  }
  return layout;
}

}  // namespace bmpipe

// The argument file bmpipe writes for Megatron-LM (megatron.h, ExportMegatron).
#include <map>

#include <fmt/format.h>

#include "bmpipe/core/text.h"
#include "bmpipe/frameworks/megatron/megatron.h"
#include "bmpipe/frameworks/settings.h"
#include "bmpipe/frameworks/stages.h"
#include "bmpipe/sim/simulator.h"

namespace bmpipe {
namespace {

// Megatron's --moe-layer-freq for the model: a list of 1 (MoE) and 0 (dense) per decoder layer,
// written with Python list products ("[0]*3+[1]*58"), which Megatron-LM evaluates; empty when
// every layer is MoE (Megatron's default, 1).
std::string MoeLayerFreq(const MoeInfo& moe, int layers) {
  if (moe.dense_layers.empty()) return "";
  std::vector<int> is_moe(layers, 1);
  for (int l : moe.dense_layers) is_moe[l] = 0;
  std::vector<std::string> runs;
  for (int i = 0; i < layers;) {
    int j = i;
    while (j < layers && is_moe[j] == is_moe[i]) ++j;
    runs.push_back(fmt::format("[{}]*{}", is_moe[i], j - i));
    i = j;
  }
  return fmt::format("{}", fmt::join(runs, "+"));
}

// The launch flags of the problem's training run, or comments naming what to fill in.
Result<std::string> MegatronRunFlags(const Problem& problem, int layers, TargetKind spec) {
  const Pipeline& p = problem.pipeline;
  if (!problem.training) {
    return fmt::format("# the problem states no training run (its `training` section): add --tensor-model-parallel-size, "
                       "--micro-batch-size, --global-batch-size = micro-batch size x data-parallel size x {} (the "
                       "problem's micro-batches) and --seq-length\n",
                       p.micro_batches);
  }
  const TrainingInfo& t = *problem.training;
  std::string out = fmt::format("--tensor-model-parallel-size {}\n", t.tensor_parallel);
  if (t.sequence_parallel && t.tensor_parallel > 1) out += "--sequence-parallel\n";  // Megatron refuses it with TP 1
  if (t.context_parallel > 1) out += fmt::format("--context-parallel-size {}\n", t.context_parallel);
  out += fmt::format("--micro-batch-size {}\n--global-batch-size {}\n--seq-length {}\n", t.micro_batch_size,
                     t.global_batch_size, t.seq_length);
  out += "--bf16\n";
  if (t.precision == "fp8") {
    // A scale per tensor, by the run's recipe: current scaling (tensorwise, what NVIDIA's recipes run
    // and the FP8 efficiency was fitted on) unless the problem states delayed or blockwise.
    const std::string recipe = t.fp8_recipe.empty() ? "tensorwise" : t.fp8_recipe;
    out += fmt::format("--fp8-format hybrid\n--fp8-recipe {}\n", recipe);
    if (recipe == "delayed") out += "--fp8-amax-history-len 1024\n--fp8-amax-compute-algo max\n";
  } else if (t.precision == "mxfp8") {
    // Blackwell's block scaling: E4M3 everywhere, a scale per 32 elements.
    out += "--fp8-format e4m3\n--fp8-recipe mxfp8\n";
  } else if (t.precision == "nvfp4") {
    // Transformer Engine's NVFP4BlockScaling in every decoder layer (megatron-core >= 0.15 with
    // Transformer Engine >= 2.8); FP8's flags stay off (megatron-core refuses both).
    out += "--fp4-format e2m1\n--fp4-recipe nvfp4\n";
  }
  if (t.precision != "bf16") {
    if (t.fp8_params) out += t.precision == "nvfp4" ? "--fp4-param-gather\n" : "--fp8-param-gather\n";
    if (t.no_fp8_transpose_cache) out += "--disable-parameter-transpose-cache\n";
  }
  if (t.distributed_optimizer) out += "--use-distributed-optimizer\n";
  if (ZeroStage(t) >= 2) {
    // ZeRO-2/3: Megatron-FSDP, which saves checkpoints only as fsdp_dtensor.
    out += fmt::format("--use-megatron-fsdp\n--data-parallel-sharding-strategy {}\n--ckpt-format fsdp_dtensor\n",
                       ZeroStage(t) == 2 ? "optim_grads" : "optim_grads_params");
  }
  if (t.overlap_grad_reduce) out += t.distributed_optimizer ? "--overlap-grad-reduce\n--overlap-param-gather\n" : "--overlap-grad-reduce\n";
  if (t.grad_dtype == "bf16" || t.optimizer_dtype == "bf16" || t.offload_optimizer) {
    out += "--use-precision-aware-optimizer\n";  // what the state dtypes and the CPU optimizer need
    if (t.grad_dtype == "bf16") out += "--main-grads-dtype bf16\n";
    if (t.optimizer_dtype == "bf16") out += "--exp-avg-dtype bf16\n--exp-avg-sq-dtype bf16\n";
    if (t.offload_optimizer) out += "--optimizer-cpu-offload\n";
  }
  if (t.tp_comm_overlap) out += "--tp-comm-overlap\n";
  // Without flash attention: Transformer Engine's unfused kernel, which keeps the s x s scores as
  // the plan costs them (the default backend, auto, would pick a fused one); the local spec's core
  // attention is unfused already.
  if (t.flash_attention) {
    out += "--attention-backend flash\n";
  } else if (spec == TargetKind::kMegatron) {
    out += "--attention-backend unfused\n";
  }
  if (t.moe.enabled()) {
    const MoeInfo& m = t.moe;
    for (int l : m.dense_layers) {
      if (l >= layers) {
        return InvalidInput(fmt::format("training.moe.dense_layers lists decoder layer {}, but the problem has {} decoder "
                                        "layers; list layers below {}",
                                        l, layers, layers));
      }
    }
    out += fmt::format("--num-experts {}\n--moe-router-topk {}\n--moe-ffn-hidden-size {}\n", m.experts, m.top_k,
                       m.expert_ffn);
    if (m.shared_expert_ffn > 0) out += fmt::format("--moe-shared-expert-intermediate-size {}\n", m.shared_expert_ffn);
    if (const std::string freq = MoeLayerFreq(m, layers); !freq.empty()) out += fmt::format("--moe-layer-freq \"{}\"\n", freq);
    out += "--moe-grouped-gemm\n";
    out += m.dispatcher == "flex" ? "--moe-token-dispatcher-type flex\n--moe-flex-dispatcher-backend deepep\n"
                                  : "--moe-token-dispatcher-type alltoall\n";
    if (m.comm_overlap || p.overlap) out += "--overlap-moe-expert-parallel-comm\n";
    if (m.cuda_graphs) out += "--cuda-graph-impl transformer_engine\n--cuda-graph-scope moe_router moe_preprocess\n";
    if (m.capacity_factor > 0) out += fmt::format("--moe-expert-capacity-factor {:g}\n", m.capacity_factor);
  }
  if (t.expert_parallel > 1) out += fmt::format("--expert-model-parallel-size {}\n", t.expert_parallel);
  if (t.expert_tensor_parallel > 0) out += fmt::format("--expert-tensor-parallel-size {}\n", t.expert_tensor_parallel);
  out += fmt::format("# data parallel {}: the launcher's world size is tensor x {}pipeline x data parallel = {} GPUs\n",
                     t.data_parallel, t.context_parallel > 1 ? "context x " : "",
                     std::int64_t{t.tensor_parallel} * t.context_parallel * p.ranks * t.data_parallel);
  if (ZeroStage(t) >= 2) out += "# Megatron-FSDP needs CUDA_DEVICE_MAX_CONNECTIONS unset or above 1\n";
  return out;
}

// What Megatron's fine-grained offloading does beside the plan: its "offload margin" keeps the
// offload groups of the last decoder layer of each rank's first micro-batch chunk on the device
// (so that reloading them cannot stall the backward that follows), in flight at the rank's peak.
// Comments with how much that adds and whether every rank still fits; empty without offloading.
std::string OffloadMarginNote(const Problem& problem, const Plan& plan, const SimResult& sim) {
  const ModelShape shape = ShapeOf(problem);
  Bytes worst_free = kMaxRankBytes, most = 0;
  bool any = false;
  for (StageIdx s = 0; s < plan.num_stages(); ++s) {
    if (problem.pipeline.ChunkOf(s) != 0) continue;
    LayerIdx last = -1;
    for (LayerIdx l = std::max(plan.begin(s), shape.body_begin); l < std::min(plan.end(s), shape.body_end); ++l) last = l;
    if (last < 0) continue;
    const LayerOption& option = problem.layers[last].options[plan.option[last]];
    const Recompute r = ParseRecompute(option.name).value();
    if ((r.parts & kOffloadActivations) == 0) continue;
    const OptionIdx kept = FindRecompute(problem.layers[last], Recompute{r.parts & ~unsigned{kOffloadActivations}});
    if (kept < 0) continue;
    const Bytes margin = std::max<Bytes>(0, problem.layers[last].options[kept].saved_bytes - option.saved_bytes);
    any = true;
    most = std::max(most, margin);
    const RankIdx rank = problem.pipeline.RankOf(s);
    worst_free = std::min(worst_free, sim.capacity_bytes - sim.ranks[rank].peak_memory_bytes - margin);
  }
  if (!any) return "";
  return fmt::format("# Megatron also keeps the offload groups of each rank's last decoder layer of its first micro-batch "
                     "on the device (its offload margin): up to {:.2f} GB more at a rank's peak than planned; {}\n",
                     static_cast<double>(most) / 1e9,
                     worst_free >= 0 ? fmt::format("every rank still fits, the fullest with {:.2f} GB of the planned capacity free",
                                                   static_cast<double>(worst_free) / 1e9)
                                     : fmt::format("a rank then exceeds its capacity by {:.2f} GB: plan with "
                                                   "--memory-headroom-gb at least that",
                                                   static_cast<double>(-worst_free) / 1e9));
}

}  // namespace

std::string MegatronCommandLine(const std::string& exported) {
  std::string line;
  std::size_t at = 0;
  while (at < exported.size()) {
    std::size_t end = exported.find('\n', at);
    if (end == std::string::npos) end = exported.size();
    const std::string flag = exported.substr(at, end - at);
    if (!flag.empty() && flag[0] != '#') line += (line.empty() ? "" : " ") + flag;
    at = end + 1;
  }
  return line;
}

Result<std::string> ExportMegatron(const Problem& problem, const Plan& plan, TargetKind kind) {
  const TargetKind spec = kind == TargetKind::kMegatronLocal ? kind : TargetKind::kMegatron;
  const ModelShape shape = ShapeOf(problem);
  const Pipeline& p = problem.pipeline;
  const Target& target = TargetOf(spec);
  std::string out = Header(problem, plan, "#");
  out += fmt::format("# for {}\n", target.framework);
  out += "# the run's flags only: merge your model's architecture flags (--hidden-size, --ffn-hidden-size,\n"
         "# --num-attention-heads, --group-query-attention --num-query-groups, --kv-channels, normalization,\n"
         "# activation, position embedding, vocabulary and tokenizer; MLA and router flags for such models)\n";
  Result<std::string> run = MegatronRunFlags(problem, shape.body(), spec);
  if (!run.ok()) return run.error();
  out += run.value();
  out += fmt::format("--transformer-impl {}\n", spec == TargetKind::kMegatronLocal ? "local" : "transformer_engine");
  out += fmt::format("--pipeline-model-parallel-size {}\n--num-layers {}\n", p.ranks, shape.body());
  if (problem.training && problem.training->mtp_layers > 0) {
    out += fmt::format("# the multi-token-prediction modules, on the last stage with the loss ('m' in the layout)\n"
                       "--mtp-num-layers {}\n",
                       problem.training->mtp_layers);
  }
  if (p.stages() > 1) {
    out += fmt::format("--pipeline-model-parallel-layout \"{}\"\n", MegatronLayout(problem, plan));
    if (p.chunks > 1) {
      out += fmt::format("# the layout gives {} virtual stages per rank: pass no other virtual-pipeline flag\n", p.chunks);
      if (p.MicroBatchGroup() != p.ranks) {
        out += fmt::format("--microbatch-group-size-per-virtual-pipeline-stage {}\n", p.MicroBatchGroup());
      }
    }
  }
  // Recomputation: the target's setting that is exactly the plan's, else the best one on the
  // plan's partition, with what it costs.
  const SimResult want = SimulatePlan(problem, plan).value();
  // One flag per line.
  auto flags_line = [](const std::string& setting) {
    if (setting.rfind("--", 0) != 0) return "# " + setting + ": no recomputation flag\n";
    std::string lines = setting;
    for (std::size_t at = lines.find(" --"); at != std::string::npos; at = lines.find(" --", at)) lines[at] = '\n';
    return lines + "\n";
  };
  std::string exact, closest;
  SimResult have;
  Status walked = ForEachTargetSetting(
      problem, spec,
      [&](const TargetSetting& setting) {
        if (setting.space.Contains(plan)) {
          exact = setting.flags;
          return false;
        }
        Plan candidate = plan;
        setting.space.AssignFixed(candidate);
        const SimResult sim = SimulatePlan(problem, candidate).value();
        if (closest.empty() || (sim.fits && !have.fits) || (sim.fits == have.fits && sim.iteration_ns < have.iteration_ns)) {
          closest = setting.flags;
          have = sim;
        }
        return true;
      },
      MostDecoderLayers(problem, plan));
  if (!walked.ok()) return walked.error();
  if (!exact.empty()) return out + flags_line(exact) + OffloadMarginNote(problem, plan, want);
  out += flags_line(closest);
  out += fmt::format("# NOT the plan: Megatron takes one recomputation setting for every layer, and the plan recomputes "
                     "per layer (plan with --target {} for the best plan Megatron runs as planned).\n",
                     target.name);
  out += fmt::format("# With the setting above on this partition the simulated iteration is {} instead of the plan's {} "
                     "({:+.1f} %){}\n",
                     FormatDuration(have.iteration_ns), FormatDuration(want.iteration_ns),
                     100.0 * (static_cast<double>(have.iteration_ns) / static_cast<double>(want.iteration_ns) - 1),
                     have.fits ? "" : ", and it does NOT fit in memory");
  out += "# The plan's recomputation, per decoder layer (for a Megatron patched to recompute per layer):\n";
  std::map<std::string, std::vector<int>> ids;
  for (LayerIdx l = shape.body_begin; l < shape.body_end; ++l) ids[OptionName(problem, plan, l)].push_back(l - shape.body_begin);
  for (const auto& [name, layers] : ids) out += fmt::format("#   {}: decoder layers {}\n", name, List(layers));
  return out;
}

}  // namespace bmpipe

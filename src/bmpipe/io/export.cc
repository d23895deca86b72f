#include "bmpipe/io/export.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "bmpipe/baselines/common.h"
#include "bmpipe/core/json_cursor.h"
#include "bmpipe/core/text.h"
#include "bmpipe/io/export_common.h"
#include "bmpipe/schedule/schedule.h"
#include "bmpipe/sim/simulator.h"

namespace bmpipe {
namespace {

// What a layer's option means to the frameworks. MindFormers: FULL, BOTH (select and
// select_comm), SLCT, COMM. Megatron: full, or selective with modules.
enum class Kind { kNone, kSelect, kComm, kBoth, kFull, kOther };

Kind KindOf(const std::string& option) {
  const Result<Recompute> r = ParseRecompute(option);
  if (!r.ok()) return Kind::kOther;
  if (r.value().none()) return Kind::kNone;
  if (r.value().full()) return Kind::kFull;
  switch (r.value().parts) {
    case kRecomputeMlpActivation:
      return Kind::kSelect;
    case kRecomputeNorms:
      return Kind::kComm;
    case kRecomputeMlpActivation | kRecomputeNorms:
      return Kind::kBoth;
    default:
      return Kind::kOther;
  }
}

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
Result<std::string> MegatronRunFlags(const Problem& problem, int layers) {
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
    // Transformer Engine's delayed scaling, as the cost model's FP8 GEMMs assume.
    out += "--fp8-format hybrid\n--fp8-recipe delayed\n--fp8-amax-history-len 1024\n--fp8-amax-compute-algo max\n";
    if (t.fp8_params) out += "--fp8-param-gather\n";
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
  if (t.flash_attention) out += "--attention-backend flash\n";
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
    if (m.comm_overlap) out += "--overlap-moe-expert-parallel-comm\n";
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

Result<std::string> Megatron(const Problem& problem, const Plan& plan, TargetKind spec) {
  const ModelShape shape = ShapeOf(problem);
  const Pipeline& p = problem.pipeline;
  const Target& target = TargetOf(spec);
  if (p.schedule == ScheduleKind::kGPipe) {
    return InvalidInput("Megatron runs no GPipe schedule; plan with schedule 1f1b to export to Megatron");
  }
  if (p.SplitBackward()) {
    return InvalidInput(fmt::format("Megatron-LM runs no split-backward schedule such as '{}'; plan with schedule "
                                    "1f1b or interleaved-1f1b to export to Megatron, or export the op order with "
                                    "--to csv for torch.distributed.pipelining",
                                    ScheduleName(p.schedule)));
  }
  std::string out = Header(problem, plan, "#");
  out += fmt::format("# for {}\n", target.framework);
  Result<std::string> run = MegatronRunFlags(problem, shape.body());
  if (!run.ok()) return run.error();
  out += run.value();
  out += fmt::format("--transformer-impl {}\n", spec == TargetKind::kMegatronLocal ? "local" : "transformer_engine");
  out += fmt::format("--pipeline-model-parallel-size {}\n--num-layers {}\n", p.ranks, shape.body());
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
  if (!exact.empty()) return out + flags_line(exact);
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

// MindFormers counts per stage (chunk-major) of FULL, BOTH, SLCT, COMM.
struct MfCounts {
  int full = 0, both = 0, select = 0, comm = 0;
};

Result<std::string> MindFormers(const Problem& problem, const Plan& plan) {
  const ModelShape shape = ShapeOf(problem);
  const Pipeline& p = problem.pipeline;
  if (p.SplitBackward() || p.MicroBatchGroup() != p.ranks) {
    return InvalidInput(fmt::format("MindFormers runs 1F1B and its interleaving with groups of pipeline.ranks "
                                    "micro-batches; plan with schedule 1f1b or interleaved-1f1b without "
                                    "micro_batch_group to export to MindFormers (this pipeline: schedule '{}', "
                                    "groups of {})",
                                    ScheduleName(p.schedule), p.MicroBatchGroup()));
  }
  const std::vector<StageLayers> stages = Stages(plan, shape);
  const int layers = shape.body();
  const int per = layers / (p.ranks * p.chunks);
  std::vector<int> offset;
  std::vector<MfCounts> counts;
  std::vector<std::string> approximated;
  for (std::size_t s = 0; s < stages.size(); ++s) {
    if (stages[s].body.empty()) {
      return InvalidInput(fmt::format("stage {} holds no decoder layer; MindFormers gives every stage at least one "
                                      "(offset {} would be -{})",
                                      s, s, per));
    }
    offset.push_back(static_cast<int>(stages[s].body.size()) - per);
    MfCounts c;
    for (LayerIdx l : stages[s].body) {
      const std::string name = OptionName(problem, plan, l);
      switch (KindOf(name)) {
        case Kind::kNone: break;
        case Kind::kFull: ++c.full; break;
        case Kind::kBoth: ++c.both; break;
        case Kind::kSelect: ++c.select; break;
        case Kind::kComm: ++c.comm; break;
        case Kind::kOther:
          ++c.full;
          approximated.push_back(fmt::format("decoder layer {} ('{}')", l - shape.body_begin, name));
          break;
      }
    }
    counts.push_back(c);
  }
  // Lists of P, or V x P (chunk-major, as the stages).
  auto lists = [&](auto value) {
    std::vector<std::string> rows;
    for (int v = 0; v < p.chunks; ++v) {
      std::vector<int> row;
      for (int r = 0; r < p.ranks; ++r) row.push_back(value(v * p.ranks + r));
      rows.push_back(List(row));
    }
    return rows.size() == 1 ? rows[0] : fmt::format("[{}]", fmt::join(rows, ", "));
  };
  int sum = 0;
  for (int o : offset) sum += o;
  std::string out = Header(problem, plan, "#");
  out += fmt::format("# offsets sum to {} = num_layers mod (pipeline_stage x pp_interleave_num) = {} mod {}\n", sum,
                     layers, p.ranks * p.chunks);
  out += fmt::format("parallel_config:\n  pipeline_stage: {}\n  micro_batch_num: {}\n", p.ranks, p.micro_batches);
  if (p.chunks > 1) out += "parallel:\n  pipeline_config:\n    pipeline_interleave: true\n";
  out += fmt::format("model:\n  model_config:\n    num_layers: {}\n", layers);
  if (p.chunks > 1) out += fmt::format("    pp_interleave_num: {}\n", p.chunks);
  out += "    offset: " + lists([&](int s) { return offset[s]; }) + "\n";
  // Counts from each stage's first layer; full implies both selective kinds (MindFormers).
  out += "recompute_config:\n";
  out += "  recompute: " + lists([&](int s) { return counts[s].full; }) + "\n";
  out += "  select_recompute: " + lists([&](int s) { return counts[s].full + counts[s].both + counts[s].select; }) + "\n";
  out += "  select_comm_recompute: " + lists([&](int s) { return counts[s].full + counts[s].both + counts[s].comm; }) + "\n";
  for (const std::string& a : approximated) {
    out += "# " + a + " has no MindFormers list; exported as full recomputation (more than the plan)\n";
  }
  // MindFormers counts each list from a stage's first layer: what it runs from these lists.
  const Result<Json> doc = ParseDocument(out, "mindformers.yaml");
  const Result<Plan> runs = doc.ok() ? ReadMindFormersPlan(doc.value(), problem, "mindformers.yaml") : Result<Plan>(doc.error());
  if (!runs.ok()) return InternalError("the MindFormers export does not read back: " + runs.error().message);
  if (runs.value().option != plan.option) {
    const SimResult want = SimulatePlan(problem, plan).value();
    const SimResult have = SimulatePlan(problem, runs.value()).value();
    if (have.iteration_ns != want.iteration_ns || !have.fits) {
      out += fmt::format("# NOT the plan: MindFormers counts each list from a stage's first layer (full, then both, then "
                         "select or select_comm, then none), so with these lists it runs another recomputation: "
                         "simulated iteration {} instead of the plan's {} ({:+.1f} %){}. Plan with --target mindformers "
                         "for the best plan MindFormers runs as planned.\n",
                         FormatDuration(have.iteration_ns), FormatDuration(want.iteration_ns),
                         100.0 * (static_cast<double>(have.iteration_ns) / static_cast<double>(want.iteration_ns) - 1),
                         have.fits ? "" : ", and it does NOT fit in memory");
    }
  }
  return out;
}

std::string Csv(const Problem& problem) {
  const Schedule schedule = Schedule(problem.pipeline);
  std::string out;
  // torch.distributed.pipelining's actions: F forward, B whole backward, I input gradient, W weight
  // gradient; an action of several ops (Op::joined) is a full backward (B joined by its W, "B") or
  // an overlapped forward and full backward ("(<F>;<B>)OVERLAP_F_B").
  const bool split = problem.pipeline.SplitBackward();
  auto action = [](const Op& op, char kind) { return fmt::format("{}{}{}", op.stage, kind, op.micro_batch); };
  for (const std::vector<Op>& ops : schedule.rank_ops()) {
    std::string row;
    for (std::size_t i = 0; i < ops.size();) {
      std::size_t end = i + 1;
      while (end < ops.size() && ops[end].joined) ++end;
      std::string text;
      if (end - i == 1) {
        const OpKind kind = ops[i].kind;
        text = action(ops[i], kind == OpKind::kForward ? 'F' : kind == OpKind::kWeightGrad ? 'W' : split ? 'I' : 'B');
      } else if (end - i == 2) {  // B and its W
        text = action(ops[i], 'B');
      } else {  // F, then B and its W
        text = fmt::format("({};{})OVERLAP_F_B", action(ops[i], 'F'), action(ops[i + 1], 'B'));
      }
      row += (row.empty() ? "" : ",") + text;
      i = end;
    }
    out += row + "\n";
  }
  return out;
}

}  // namespace

std::vector<std::string> ExportFormatNames() { return {"megatron", "mindformers", "deepspeed", "torchtitan", "csv"}; }

Result<ExportFormat> ParseExportFormat(const std::string& name) {
  const std::vector<std::string> names = ExportFormatNames();
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) return static_cast<ExportFormat>(i);
  }
  return InvalidInput(fmt::format("unknown export format '{}'{}; formats: {}", name, DidYouMean(name, names),
                                  fmt::join(names, ", ")));
}

TargetKind DefaultTarget(ExportFormat format) {
  switch (format) {
    case ExportFormat::kMegatron:
      return TargetKind::kMegatron;
    case ExportFormat::kMindFormers:
      return TargetKind::kMindFormers;
    case ExportFormat::kDeepSpeed:
      return TargetKind::kDeepSpeed;
    case ExportFormat::kTorchTitan:
      return TargetKind::kTorchTitan;
    case ExportFormat::kCsv:
      return TargetKind::kTorch;
  }
  return TargetKind::kAny;
}

Result<std::string> ExportPlan(const Problem& problem, const Plan& plan, ExportFormat format, TargetKind target) {
  Status valid = ValidatePlan(problem, plan);
  if (!valid.ok()) return valid.error();
  if (problem.pipeline.Copies() > 1) return InvalidInput(std::string(kNoFrameworkRunsDualPipe));
  const TargetKind runs = format == ExportFormat::kMegatron && target == TargetKind::kMegatronLocal ? target : DefaultTarget(format);
  if (problem.training) {
    if (Status setup = TargetRunsSetup(runs, *problem.training, &problem.pipeline); !setup.ok()) return setup.error();
  }
  switch (format) {
    case ExportFormat::kMegatron:
      return Megatron(problem, plan, target == TargetKind::kMegatronLocal ? target : TargetKind::kMegatron);
    case ExportFormat::kMindFormers:
      return MindFormers(problem, plan);
    case ExportFormat::kDeepSpeed:
      return ExportDeepSpeed(problem, plan);
    case ExportFormat::kTorchTitan:
      return ExportTorchTitan(problem, plan);
    case ExportFormat::kCsv:
      return Csv(problem);
  }
  return InternalError("unknown export format");
}

}  // namespace bmpipe

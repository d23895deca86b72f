// The benchmark suite of `bmpipe compare`: bmpipe against every baseline on large cases, judged by
// one simulator; then bmpipe's plan for every target (the framework that runs it) against stock
// Megatron's best, each plan exported and read back. Prints docs/benchmarks.md
// (scripts/benchmarks.sh regenerates it).
//
//   build/bench/compare_suite [--time-limit S] [--only NAME]
//   build/bench/compare_suite --write-problems DIR   # each case's problem as DIR/case-NN.json
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "bmpipe/baselines/compare.h"
#include "bmpipe/core/text.h"
#include "bmpipe/cost/problem_builder.h"
#include "bmpipe/report/compare_report.h"
#include "bmpipe/frameworks/formats.h"
#include "bmpipe/io/problem_json.h"
#include "bmpipe/frameworks/settings.h"
#include "bmpipe/problem/problem_reader.h"

namespace bmpipe {
namespace {

struct Case {
  std::string name;
  std::string what;  // one line: why the case is here
  Problem problem;
};

TrainingSetup Setup(int tp, int pp, int dp, int vpp, int gbs, int seq, bool sp_fa_distopt) {
  TrainingSetup s;
  s.tp = tp;
  s.pp = pp;
  s.dp = dp;
  s.vpp = vpp;
  s.global_batch_size = gbs;
  s.seq = seq;
  s.sequence_parallel = s.flash_attention = s.distributed_optimizer = sp_fa_distopt;
  // The options every target's settings use (Megatron's selective+mlp, MindFormers' select and both).
  for (const Target& t : Targets()) {
    for (const std::string& o : TargetRecomputeOptions(t.kind)) {
      if (std::find(s.recompute.begin(), s.recompute.end(), o) == s.recompute.end()) s.recompute.push_back(o);
    }
  }
  return s;
}

Problem FromModel(const ModelSpec& model, const std::string& device, const TrainingSetup& setup) {
  Result<Problem> p = BuildProblem(model, DevicePreset(device).value(), setup);
  if (!p.ok()) {
    std::fprintf(stderr, "%s\n", p.error().message.c_str());
    std::exit(1);
  }
  return p.value();
}

// A vision encoder (ViT-H/14 shape: 32 layers, h 1280, 16 heads, GELU 5120, 1024 patch tokens)
// feeding a Llama-3-8B decoder (4096 tokens): two layer types with very different costs in one
// pipeline.
Problem VisionLanguage(const std::string& device, const TrainingSetup& setup) {
  ModelSpec vit;
  vit.name = "vit-h";
  vit.family = "gpt";
  vit.layers = 32;
  vit.hidden = 1280;
  vit.ffn = 5120;
  vit.vocab = 1024;  // the patch embedding stands in for the token embedding
  vit.heads = vit.kv_heads = 16;
  vit.head_dim = vit.v_head_dim = 80;
  vit.mlp = MlpKind::kGelu;
  vit.norm = NormKind::kLayerNorm;
  vit.qkv_bias = vit.linear_bias = true;
  TrainingSetup vit_setup = setup;
  vit_setup.seq = 1024;
  const Problem encoder = FromModel(vit, device, vit_setup);
  Problem p = FromModel(ModelPreset("llama3-8b").value(), device, setup);
  std::vector<Layer> layers;
  for (std::size_t i = 0; i + 1 < encoder.layers.size(); ++i) {  // patch embedding and encoder layers
    Layer l = encoder.layers[i];
    l.name = i == 0 ? "patch-embedding" : "vision-encoder";
    layers.push_back(l);
  }
  for (const Layer& l : p.layers) layers.push_back(l);
  p.layers = layers;
  p.name = "vit-h encoder + llama3-8b decoder on " + device;
  return p;
}

std::vector<Case> Cases() {
  std::vector<Case> cases;
  const ModelSpec gpt3 = ModelPreset("gpt3-175b").value();
  const ModelSpec llama70 = ModelPreset("llama3-70b").value();
  const ModelSpec llama405 = ModelPreset("llama3-405b").value();
  cases.push_back({"gpt3-175b, 1024 A100-40GB, memory-tight",
                   "TP 8, PP 16, DP 8, seq 2048, global batch 1536 (m = 192); no sequence parallelism or flash attention",
                   FromModel(gpt3, "a100-40gb", Setup(8, 16, 8, 1, 1536, 2048, false))});
  cases.push_back({"gpt3-175b, 1024 A100-80GB, memory-loose",
                   "as above with sequence parallelism, flash attention and the distributed optimizer",
                   FromModel(gpt3, "a100-80gb", Setup(8, 16, 8, 1, 1536, 2048, true))});
  cases.push_back({"llama3-70b, 512 H100, memory-tight", "TP 8, PP 4, DP 16, seq 8192, global batch 512 (m = 32); no SP/FA",
                   FromModel(llama70, "h100-80gb", Setup(8, 4, 16, 1, 512, 8192, false))});
  cases.push_back({"llama3-70b, 512 H100, memory-loose", "TP 8, PP 8, DP 8, seq 8192, global batch 512 (m = 64); SP, FA, distributed optimizer",
                   FromModel(llama70, "h100-80gb", Setup(8, 8, 8, 1, 512, 8192, true))});
  cases.push_back({"llama3-405b, 16384 H100, m = p", "TP 8, PP 16, DP 128, seq 8192, global batch 2048 (m = 16); SP, FA, distributed optimizer",
                   FromModel(llama405, "h100-80gb", Setup(8, 16, 128, 1, 2048, 8192, true))});
  cases.push_back({"llama3-405b, 16384 H100, m = p, interleaved", "as above with 2 chunks per rank (32 stages)",
                   FromModel(llama405, "h100-80gb", Setup(8, 16, 128, 2, 2048, 8192, true))});
  // The split-backward schedules on the same two setups: every planner under ZB-H1, ZB-H2, ZB-V,
  // interleaved ZB and DualPipeV (Megatron runs none of them).
  struct SplitCase {
    ScheduleKind schedule;
    const char* name;
    int chunks;
    const char* how;
  };
  for (const SplitCase& z : {SplitCase{ScheduleKind::kZeroBubbleH1, "ZB-H1", 1, "backward split into B and W"},
                             SplitCase{ScheduleKind::kZeroBubbleH2, "ZB-H2", 1, "twice ZB-H1's warm-up and W deferral"},
                             SplitCase{ScheduleKind::kZeroBubbleV, "ZB-V", 2, "2 chunks per rank in a V"},
                             SplitCase{ScheduleKind::kInterleavedZeroBubble, "interleaved ZB", 2,
                                       "2 chunks per rank, torch's InterleavedZeroBubble order"},
                             SplitCase{ScheduleKind::kDualPipe, "DualPipe", 2,
                                       "every stage on two ranks, half the micro-batches from each end, DeepSeek's "
                                       "order, overlapped pairs run in turn"},
                             SplitCase{ScheduleKind::kDualPipeV, "DualPipeV", 2,
                                       "2 chunks per rank in a V, torch's DualPipeV order, overlapped pairs run in turn"}}) {
    TrainingSetup big = Setup(8, 16, 128, z.chunks, 2048, 8192, true), loose = Setup(8, 8, 8, z.chunks, 512, 8192, true);
    big.schedule = loose.schedule = z.schedule;
    // DualPipe and DualPipeV need at least 2p micro-batches: not the m = p case.
    if (TraitsOf(z.schedule).min_micro_batches_per_rank == 0) {
      cases.push_back({fmt::format("llama3-405b, 16384 H100, m = p, {}", z.name),
                       fmt::format("as the m = p case under {} ({})", z.name, z.how),
                       FromModel(llama405, "h100-80gb", big)});
    }
    cases.push_back({fmt::format("llama3-70b, 512 H100, memory-loose, {}", z.name),
                     fmt::format("as the memory-loose case under {}", z.name), FromModel(llama70, "h100-80gb", loose)});
  }
  // A MoE model under each schedule with pairs, the pairs in turn and overlapped (docs/semantics.md,
  // "Actions"): Qwen3-30B-A3B (128 experts, top 8) on 64 H100, TP 1, PP 4, EP 8, DP 16, seq 4096,
  // global batch 512 (m = 32).
  const ModelSpec qwen3moe = ModelPreset("qwen3-30b-a3b").value();
  struct PairCase {
    ScheduleKind schedule;
    const char* name;
  };
  for (const PairCase& pc : {PairCase{ScheduleKind::kOneFOneB, "interleaved 1F1B"}, PairCase{ScheduleKind::kDualPipe, "DualPipe"},
                             PairCase{ScheduleKind::kDualPipeV, "DualPipeV"}}) {
    for (bool overlap : {false, true}) {
      TrainingSetup moe = Setup(1, 4, 16, 2, 512, 4096, true);
      moe.ep = 8;
      moe.schedule = pc.schedule;
      moe.overlap_pairs = overlap;
      const char* how = !overlap ? "pairs in turn"
                        : pc.schedule == ScheduleKind::kOneFOneB ? "Megatron's combined 1F1B"
                                                                 : "overlapped pairs";
      cases.push_back({fmt::format("qwen3-30b-a3b, 64 H100, EP 8, {}, {}", pc.name, how),
                       fmt::format("TP 1, PP 4 x 2 chunks, EP 8, DP 16, seq 4096, global batch 512 (m = 32); {}, {}",
                                   pc.name, overlap ? "each pair's all-to-all under the partner's compute"
                                                    : "each pair's ops one after the other"),
                       FromModel(qwen3moe, "h100-80gb", moe)});
    }
  }
  Problem demo = LoadProblem(std::string(BMPIPE_SOURCE_DIR) + "/examples/mindformers-demo/problem.yaml").value();
  cases.push_back({"MindFormers tool demo", "the tool's own demo: 16 stages, 16 micro-batches, 56 GB", demo});
  Problem demo3 = LoadProblem(std::string(BMPIPE_SOURCE_DIR) + "/examples/mindformers-demo/problem-vpp3.yaml").value();
  cases.push_back({"MindFormers tool demo, 3 chunks", "the same with 3 chunks per rank and 62 GB", demo3});
  const ModelSpec qwen = LoadModel(std::string(BMPIPE_SOURCE_DIR) + "/tests/data/hf/qwen2-7b.json").value();
  cases.push_back({"qwen2-7b (152k vocabulary), 8 A100-40GB", "TP 1, PP 8, seq 4096, global batch 64: embedding and head weigh as much as several layers",
                   FromModel(qwen, "a100-40gb", Setup(1, 8, 1, 1, 64, 4096, true))});
  cases.push_back({"vision encoder + language decoder, 16 A100-80GB", "ViT-H (32 layers, 1024 patches) + Llama-3-8B (32 layers, 4096 tokens); TP 2, PP 8, global batch 64",
                   VisionLanguage("a100-80gb", Setup(2, 8, 1, 1, 64, 4096, true))});
  return cases;
}

// bmpipe's plan for each target against stock Megatron's best (Transformer Engine spec, any
// layout, any global recomputation setting), with each plan's export read back and re-simulated.
std::string TargetTable(double time_limit_s, const std::string& only) {
  std::string out = "\n## Per target: what each framework runs as planned\n\n";
  out += "bmpipe plans within what each framework executes unmodified (`--target`, docs/targets.md). Each cell: "
         "the plan's simulated iteration time and its speed-up over stock Megatron's best (`megatron`: its best "
         "layout and global recomputation setting with the Transformer Engine spec, found exactly: bmpipe's "
         "megatron plan is that configuration, so its speed-up is 1 by construction). `any` is bmpipe's per-layer "
         "plan, which needs a framework that recomputes per layer. \"n/a\": the framework cannot run the "
         "pipeline (DeepSpeed: interleaving) or the training setup (DeepSpeed: fp32 gradients without ZeRO; "
         "docs/targets.md, \"Training setups\"); \"no fit\": no plan it runs fits. Every plan is exported in its "
         "framework's format, read back by `bmpipe simulate --plan` and simulated again.\n\n";
  out += "| case | megatron | megatron-local | mindformers | deepspeed | torchtitan | torch | any |\n";
  out += "|---|---|---|---|---|---|---|---|\n";
  std::map<std::string, std::vector<double>> speedups;
  int exported = 0, exact = 0;
  std::string mismatches, slower;
  for (const Case& c : Cases()) {
    if (!only.empty() && c.name.find(only) == std::string::npos) continue;
    PlannerOptions planner;
    planner.time_limit_s = time_limit_s;
    std::map<TargetKind, TargetPlan> plans;
    // The restricted targets first: their plans seed the per-layer one (`any`), never slower.
    for (const Target& t : Targets()) {
      if (t.kind == TargetKind::kAny) continue;
      if (c.problem.training && !TargetRunsSetup(t.kind, *c.problem.training).ok()) continue;
      Result<TargetPlan> r = PlanForTarget(c.problem, t.kind, planner);
      if (r.ok()) plans[t.kind] = r.value();
    }
    PlannerOptions seeded = planner;
    for (const auto& [kind, plan] : plans) {
      if (plan.planner.status == ModelStatus::kOptimal || plan.planner.status == ModelStatus::kFeasible) {
        seeded.seeds.push_back(plan.planner.plan);
      }
    }
    if (Result<TargetPlan> r = PlanForTarget(c.problem, TargetKind::kAny, seeded); r.ok()) plans[TargetKind::kAny] = r.value();
    const auto any = plans.find(TargetKind::kAny);
    for (const auto& [kind, plan] : plans) {
      const bool has = plan.planner.status == ModelStatus::kOptimal || plan.planner.status == ModelStatus::kFeasible;
      if (has && (any == plans.end() || any->second.planner.iteration_ns > plan.planner.iteration_ns)) {
        slower += fmt::format("\n- {}: the per-layer plan is slower than {}'s", c.name, TargetOf(kind).name);
      }
    }
    const auto megatron = plans.find(TargetKind::kMegatron);
    const bool has_base = megatron != plans.end() && (megatron->second.planner.status == ModelStatus::kOptimal ||
                                                     megatron->second.planner.status == ModelStatus::kFeasible);
    std::string line = "| " + c.name + " |";
    for (TargetKind kind : {TargetKind::kMegatron, TargetKind::kMegatronLocal, TargetKind::kMindFormers,
                            TargetKind::kDeepSpeed, TargetKind::kTorchTitan, TargetKind::kTorch, TargetKind::kAny}) {
      const auto it = plans.find(kind);
      if (it == plans.end()) {
        line += " n/a |";
        continue;
      }
      const PlannerResult& r = it->second.planner;
      if (r.status != ModelStatus::kOptimal && r.status != ModelStatus::kFeasible) {
        line += r.status == ModelStatus::kInfeasible ? " no fit |" : " no plan |";
        continue;
      }
      const double s = has_base ? static_cast<double>(megatron->second.planner.iteration_ns) /
                                      static_cast<double>(r.iteration_ns)
                                : 0;
      line += fmt::format(" {}{}{} |", FormatDuration(r.iteration_ns), s > 0 ? fmt::format(" ({:.3f}x)", s) : "",
                          r.status == ModelStatus::kOptimal ? "" : fmt::format(", gap {:.1f}%", 100 * r.gap));
      if (s > 0) speedups[std::string(TargetOf(kind).name)].push_back(s);
      if (const std::optional<FrameworkId> format = ReadBackFormat(kind)) {
        ++exported;
        const Result<std::string> text = ExportPlan(c.problem, r.plan, *format, kind);
        Result<Plan> back = text.ok() ? ReadLauncherPlan(text.value(), DetectPlanFormat(text.value()).value(), c.problem,
                                                         "export")
                                      : Result<Plan>(text.error());
        if (back.ok() && SimulatePlan(c.problem, back.value()).value().iteration_ns == r.iteration_ns) {
          ++exact;
        } else {
          mismatches += fmt::format("\n- {} / {}: {}", c.name, TargetOf(kind).name,
                                    back.ok() ? "read back to another iteration time" : back.error().message);
        }
      }
    }
    out += line + "\n";
    std::fflush(stdout);
  }
  out += "\nSpeed-up over stock Megatron's best, per target (cases where both fit):\n\n";
  out += "| target | cases | geometric mean | max |\n|---|---|---|---|\n";
  for (const Target& t : Targets()) {
    const std::vector<double>& v = speedups[std::string(t.name)];
    if (v.empty()) continue;
    double log_sum = 0, most = 0;
    for (double x : v) {
      log_sum += std::log(x);
      most = std::max(most, x);
    }
    out += fmt::format("| {} | {} | {:.3f}x | {:.3f}x |\n", t.name, v.size(), std::exp(log_sum / static_cast<double>(v.size())),
                       most);
  }
  out += fmt::format("\nExports read back by `simulate --plan` to the plan's exact iteration time: {} of {}.{}\n", exact,
                     exported, mismatches);
  out += fmt::format("\nThe per-layer plan (`any`, seeded with every other target's plan) is no slower than any of them: "
                     "{}{}\n",
                     slower.empty() ? "yes, on every case" : "NO", slower);
  return out;
}

int Main(int argc, char** argv) {
  double time_limit = 30;
  std::string only;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--time-limit" && i + 1 < argc) {
      time_limit = std::atof(argv[++i]);
    } else if (a == "--only" && i + 1 < argc) {
      only = argv[++i];
    } else if (a == "--write-problems" && i + 1 < argc) {
      // Each case's problem as a JSON file in this folder, and nothing else (the instance library).
      const std::string dir = argv[++i];
      int k = 0;
      for (const Case& c : Cases()) {
        const std::string path = fmt::format("{}/case-{:02d}.json", dir, k++);
        std::FILE* f = std::fopen(path.c_str(), "w");
        if (f == nullptr) {
          std::fprintf(stderr, "cannot write %s\n", path.c_str());
          return 3;
        }
        const std::string text = ProblemJsonText(c.problem, c.name + ": " + c.what);
        std::fwrite(text.data(), 1, text.size(), f);
        std::fclose(f);
        std::printf("%s  %s\n", path.c_str(), c.name.c_str());
      }
      return 0;
    } else {
      std::fprintf(stderr, "unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  CompareOptions options;
  options.time_limit_s = time_limit;
  // Per baseline: bmpipe's speed-ups over it (cases where both fit); memory-use gain over Megatron.
  std::map<std::string, std::vector<double>> speedups;
  std::vector<double> memory_gain;
  std::string details, slower;
  std::printf("| case | bmpipe | status | megatron | pipedream | merak | adapipe | mist | mindformers-tool |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|\n");
  for (const Case& c : Cases()) {
    if (!only.empty() && c.name.find(only) == std::string::npos) continue;
    const std::vector<CompareRow> rows = Compare(c.problem, options).value();
    const CompareRow& b = rows.front();
    std::string line = fmt::format("| {} | {} | {} |", c.name, b.has_plan ? FormatDuration(b.sim.iteration_ns) : "no plan",
                                   b.status.empty() ? b.note : b.status);
    for (std::size_t i = 1; i < rows.size(); ++i) {
      const CompareRow& r = rows[i];
      if (!r.applicable) {
        line += " n/a |";
      } else if (!r.has_plan || !r.fits) {
        line += " does not fit |";
      } else {
        const double s = b.has_plan ? static_cast<double>(r.sim.iteration_ns) / static_cast<double>(b.sim.iteration_ns) : 0;
        line += fmt::format(" {} ({:.3f}x) |", FormatDuration(r.sim.iteration_ns), s);
        if (s > 0) speedups[r.name].push_back(s);
        if (r.name == "megatron" && b.has_plan) memory_gain.push_back(MeanMemoryUtilization(b.sim) / MeanMemoryUtilization(r.sim));
      }
    }
    for (std::size_t i = 1; i < rows.size(); ++i) {
      const CompareRow& r = rows[i];
      if (r.has_plan && r.fits && (!b.has_plan || b.sim.iteration_ns > r.sim.iteration_ns)) {
        slower += fmt::format("\n- {}: bmpipe is slower than {}", c.name, r.name);
      }
    }
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
    details += fmt::format("\n### {}\n\n{}. `{}`\n\n```\n{}```\n", c.name, c.what, c.problem.name,
                           FormatCompare("bmpipe compare", c.problem, rows));
  }
  std::printf("\nbmpipe's plan (its planner seeded with every baseline's plan) is no slower than any baseline's: %s%s\n",
              slower.empty() ? "yes, on every case" : "NO", slower.c_str());
  std::printf("\nbmpipe's speed-up over each planner (cases where both plans fit; iteration time of the planner / bmpipe's):\n\n");
  std::printf("| planner | cases | geometric mean | max |\n|---|---|---|---|\n");
  for (const std::string name : {"megatron", "pipedream", "merak", "adapipe", "mist", "mindformers-tool"}) {
    const std::vector<double>& v = speedups[name];
    if (v.empty()) {
      std::printf("| %s | 0 | - | - |\n", name.c_str());
      continue;
    }
    double log_sum = 0, most = 0;
    for (double s : v) {
      log_sum += std::log(s);
      most = std::max(most, s);
    }
    std::printf("| %s | %zu | %.3fx | %.3fx |\n", name.c_str(), v.size(), std::exp(log_sum / static_cast<double>(v.size())), most);
  }
  if (!memory_gain.empty()) {
    double log_sum = 0, most = 0;
    for (double g : memory_gain) {
      log_sum += std::log(g);
      most = std::max(most, g);
    }
    std::printf("\nMemory use (mean over ranks of peak / capacity), bmpipe over Megatron's best: geometric mean %.3fx, max %.3fx (%zu cases).\n",
                std::exp(log_sum / static_cast<double>(memory_gain.size())), most, memory_gain.size());
  }
  std::printf("%s", TargetTable(options.time_limit_s, only).c_str());
  std::printf("\n## Each case\n%s", details.c_str());
  return 0;
}

}  // namespace
}  // namespace bmpipe

int main(int argc, char** argv) { return bmpipe::Main(argc, argv); }

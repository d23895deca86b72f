// The whole-cluster search on the issues' cases (Llama-3-405B and GPT-3 175B; DeepSeek-V3 on 2048
// H800 with expert parallelism and FP8; Llama-3.1-70B at 128K tokens with context parallelism),
// on one thread and on every hardware thread:
// wall time against the target, the pruning statistics, the best configuration; and for
// Llama-3-405B the published configuration (TP 8, PP 16, DP 128, interleaved) planned with the
// same effort, to compare under bmpipe's own model.
//
//   build/bench/search_bench [--threads N]
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "bmpipe/cost/problem_builder.h"
#include "bmpipe/search/search.h"

namespace bmpipe {
namespace {

struct Case {
  std::string name, model, device;
  int devices, gbs, seq;
  double target_s;
  std::function<void(SearchOptions&)> setup = nullptr;  // beyond OptionsOf
};

SearchOptions OptionsOf(const Case& c, int threads) {
  SearchOptions o;
  o.devices = c.devices;
  o.base.global_batch_size = c.gbs;
  o.base.seq = c.seq;
  o.base.flash_attention = true;
  o.threads = threads;
  if (c.setup) c.setup(o);
  return o;
}

int Main(int argc, char** argv) {
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--threads") threads = std::atoi(argv[i + 1]);
  }
  const Case cases[] = {
      {"Llama-3-405B, 16384 x H100, 2048 x 8192 tokens", "llama3-405b", "h100-80gb", 16384, 2048, 8192, 60},
      // What a Megatron user runs (--export megatron): Megatron's settings in every configuration;
      // issue 42's target is within 2x of the row above and under 60 s.
      {"Llama-3-405B, same, --target megatron", "llama3-405b", "h100-80gb", 16384, 2048, 8192, 60,
       [](SearchOptions& o) { o.target = TargetKind::kMegatron; }},
      {"GPT-3 175B, 1024 x A100-80GB, 1536 x 2048 tokens", "gpt3-175b", "a100-80gb", 1024, 1536, 2048, 10},
      // DeepSeek's own setup: FP8 GEMMs (tried beside bf16) and bf16 Adam moments.
      {"DeepSeek-V3, 2048 x H800, 15360 x 4096 tokens", "deepseek-v3", "h800-80gb", 2048, 15360, 4096, 60,
       [](SearchOptions& o) {
         o.precision = {Precision::kBf16, Precision::kFp8};
         o.base.optimizer_dtype = StateDtype::kBf16;
       }},
      {"Llama-3.1-70B, 512 x H100, 64 x 131072 tokens", "llama3.1-70b", "h100-80gb", 512, 64, 131072, 60},
  };
  fmt::print("{:<50} {:>3} {:>8} {:>6} {:>6} {:>6} {:>6} {:>6} {:>6} {:>6} {:>6}  {:<44} {:>9} {:>6}\n", "case", "thr",
             "seconds", "target", "valid", "domin.", "memory", "time", "screen", "plan", "gap", "best configuration",
             "iteration", "MFU");
  for (const Case& c : cases) {
    const ModelSpec model = ModelPreset(c.model).value();
    const DeviceSpec device = DevicePreset(c.device).value();
    for (int t : {1, threads}) {
      const SearchResult r = SearchConfigurations(model, device, OptionsOf(c, t)).value();
      const ConfigOutcome& best = r.configs[r.ranking.at(0)];
      fmt::print("{:<50} {:>3} {:>8.1f} {:>6.0f} {:>6} {:>6} {:>6} {:>6} {:>6} {:>6} {:>5.1f}%  {:<44} {:>8.3f}s {:>5.1f}%\n",
                 c.name, t, r.seconds, c.target_s, r.configs.size(), r.Count(Verdict::kDominated),
                 r.Count(Verdict::kMemoryBound), r.Count(Verdict::kTimeBound), r.screened,
                 r.Count(Verdict::kPlanned) + r.Count(Verdict::kNoFit), 100 * r.gap, DescribeConfig(best.config),
                 static_cast<double>(best.planner.iteration_ns) / 1e9, 100 * best.mfu);
      std::fflush(stdout);
      if (t == threads) break;
    }
  }

  // The published Llama 3 405B layout, each virtual-stage count, planned as the search plans.
  fmt::print("\nLlama-3-405B published layout (TP 8, PP 16, DP 128, micro-batch 1, 16 micro-batches), "
             "sequence parallel, distributed optimizer, flash attention:\n");
  fmt::print("{:>4} {:>10} {:>10} {:>7} {:>8} {:>8}\n", "vpp", "screen", "planned", "gap", "MFU", "memory");
  const Case& llama = cases[0];
  SearchOptions o = OptionsOf(llama, threads);
  o.tp = {8};
  o.pp = {16};
  o.cp = {1};
  o.mbs = {1};
  o.plan_count = -1;
  o.top = 16;
  const SearchResult r = SearchConfigurations(ModelPreset(llama.model).value(), DevicePreset(llama.device).value(), o).value();
  for (const ConfigOutcome& c : r.configs) {
    if (!c.config.sequence_parallel || c.config.zero != 1) continue;
    if (c.verdict != Verdict::kPlanned) {
      fmt::print("{:>4} {:>10} {}\n", c.config.vpp, "", VerdictName(c.verdict));
      continue;
    }
    fmt::print("{:>4} {:>9.3f}s {:>9.3f}s {:>6.1f}% {:>7.1f}% {:>7.1f}%\n", c.config.vpp,
               static_cast<double>(c.screen_ns) / 1e9, static_cast<double>(c.planner.iteration_ns) / 1e9,
               100 * c.planner.gap, 100 * c.mfu, 100 * c.peak_memory_fraction);
  }
  return 0;
}

}  // namespace
}  // namespace bmpipe

int main(int argc, char** argv) { return bmpipe::Main(argc, argv); }

// The whole-cluster search: its bounds are sound, its best equals planning every configuration,
// and its result does not depend on the number of threads.
#include "bmpipe/search/search.h"

#include <chrono>
#include <set>

#include <gtest/gtest.h>

#include "bmpipe/cost/problem_builder.h"
#include "bmpipe/report/search_report.h"
#include "test_support.h"

namespace bmpipe {
namespace {

// A Llama-3-8B shape cut to 6 decoder layers, on 8 A100-40GB: small enough to plan every
// configuration to proven optimality, large enough that memory rules some out.
struct SmallCase {
  ModelSpec model = ModelPreset("llama3-8b").value();
  DeviceSpec device = DevicePreset("a100-40gb").value();
  SearchOptions options;
  SmallCase() {
    model.layers = 6;
    options.devices = 8;
    options.base.global_batch_size = 16;
    options.base.seq = 2048;
    options.base.flash_attention = true;
    options.base.recompute = {"none", "selective", "full"};
    options.top = 3;
    options.node_limit = -1;  // every planner run to proven optimality
    options.plan_count = -1;  // every configuration not pruned by a bound
    options.threads = 2;
    options.zero = {0, 1};  // the frontier test below covers ZeRO-2 and 3
  }
};

SearchResult SearchSmall(const SmallCase& c) {
  Result<SearchResult> r = SearchConfigurations(c.model, c.device, c.options);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.value();
}

const ConfigOutcome& Best(const SearchResult& r) { return r.configs.at(r.ranking.at(0)); }

TEST(Search, BestEqualsPlanningEveryConfiguration) {
  SmallCase c;
  const SearchResult pruned = SearchSmall(c);
  c.options.exhaustive = true;
  const SearchResult every = SearchSmall(c);
  ASSERT_EQ(pruned.configs.size(), every.configs.size());
  ASSERT_FALSE(every.ranking.empty());
  // Every configuration planned and proven: the exhaustive optimum.
  for (const ConfigOutcome& out : every.configs) {
    ASSERT_TRUE(out.verdict == Verdict::kPlanned || out.verdict == Verdict::kNoFit) << DescribeConfig(out.config);
    if (out.verdict == Verdict::kPlanned) {
      EXPECT_EQ(out.planner.status, ModelStatus::kOptimal) << DescribeConfig(out.config);
    }
  }
  EXPECT_EQ(Best(pruned).planner.iteration_ns, Best(every).planner.iteration_ns);
  EXPECT_EQ(Best(pruned).config, Best(every).config);
  // The whole top K agrees (times; configurations can tie).
  ASSERT_EQ(pruned.ranking.size(), every.ranking.size());
  for (std::size_t k = 0; k < every.ranking.size(); ++k) {
    EXPECT_EQ(pruned.configs[pruned.ranking[k]].planner.iteration_ns, every.configs[every.ranking[k]].planner.iteration_ns);
  }
  // And it got there by pruning: fewer planner runs than configurations, each step used.
  const int planned = pruned.Count(Verdict::kPlanned) + pruned.Count(Verdict::kNoFit);
  EXPECT_LT(planned, static_cast<int>(pruned.configs.size()) / 2);
  EXPECT_GT(pruned.Count(Verdict::kDominated), 0);
  EXPECT_GT(pruned.Count(Verdict::kMemoryBound), 0);
  EXPECT_GT(pruned.Count(Verdict::kTimeBound), 0);
  EXPECT_EQ(pruned.gap, 0);  // everything not pruned was proven
}

// The schedule as a dimension: with ZB-H1 offered beside 1F1B (one chunk per rank), pruning
// still finds the exhaustive optimum, which here is a ZB-H1 plan, and the report's comparison
// with the best 1F1B plan is the planned one.
TEST(Search, PicksZeroBubbleWhenItIsFaster) {
  SmallCase c;
  c.options.vpp = {1};
  c.options.pp = {2, 4};  // pipelines, where the schedule matters
  c.options.schedules = {ScheduleKind::kZeroBubbleH1};
  const SearchResult pruned = SearchSmall(c);
  c.options.exhaustive = true;
  const SearchResult every = SearchSmall(c);
  ASSERT_FALSE(every.ranking.empty());
  EXPECT_EQ(Best(pruned).config, Best(every).config);
  EXPECT_EQ(Best(pruned).planner.iteration_ns, Best(every).planner.iteration_ns);
  EXPECT_EQ(Best(every).config.schedule, ScheduleKind::kZeroBubbleH1);
  TimeNs best_one = 0;
  for (const ConfigOutcome& out : every.configs) {
    if (out.verdict == Verdict::kPlanned && out.config.schedule == ScheduleKind::kOneFOneB &&
        (best_one == 0 || out.planner.iteration_ns < best_one)) {
      best_one = out.planner.iteration_ns;
    }
  }
  ASSERT_GT(best_one, 0);
  EXPECT_LT(Best(every).planner.iteration_ns, best_one);
  EXPECT_NE(FormatSearch({}, c.options, pruned).find("sched zb-h1 won\n         sched 1f1b/interleaved: "),
            std::string::npos);
}

// Mixtral's MoE layers cut to 2, on 8 H100: context, expert and expert tensor parallelism, every
// ZeRO stage and both precisions, small enough to plan every configuration exactly.
struct FrontierCase : SmallCase {
  FrontierCase() {
    model = ModelPreset("mixtral-8x7b").value();
    model.layers = 2;
    device = DevicePreset("h100-80gb").value();
    options.base.global_batch_size = 8;
    options.base.seq = 8192;
    options.base.recompute = {"none", "full"};
    options.tp = {1, 2};
    options.pp = {1, 2};
    options.mbs = {1};
    options.cp = {1, 2};
    options.zero = {0, 1, 2, 3};
    options.precision = {Precision::kBf16, Precision::kFp8};
  }
};

TEST(Search, FrontierDimensionsPrunedAsExhaustively) {
  FrontierCase c;
  const SearchResult pruned = SearchSmall(c);
  c.options.exhaustive = true;
  const SearchResult every = SearchSmall(c);
  ASSERT_EQ(pruned.configs.size(), every.configs.size());
  // Every value of every new dimension is in the space, and the space is what the options say.
  std::set<int> cps, eps, etps, zeros, precisions;
  for (const ConfigOutcome& out : every.configs) {
    cps.insert(out.config.cp);
    eps.insert(out.config.ep);
    etps.insert(out.config.etp);
    zeros.insert(out.config.zero);
    precisions.insert(static_cast<int>(out.config.precision));
    EXPECT_EQ(out.config.tp * out.config.cp * out.config.pp * out.config.dp, 8) << DescribeConfig(out.config);
    EXPECT_EQ(out.config.tp * out.config.cp * out.config.dp % (out.config.ep * out.config.etp), 0);
    if (out.config.dp * out.config.cp == 1) {
      EXPECT_EQ(out.config.zero, 0);
    }
  }
  EXPECT_EQ(cps, (std::set<int>{1, 2}));
  EXPECT_EQ(eps, (std::set<int>{1, 2, 4, 8}));
  EXPECT_EQ(etps, (std::set<int>{1, 2}));
  EXPECT_EQ(zeros, (std::set<int>{0, 1, 2, 3}));
  EXPECT_EQ(precisions.size(), 2u);
  ASSERT_FALSE(every.ranking.empty());
  EXPECT_EQ(Best(pruned).planner.iteration_ns, Best(every).planner.iteration_ns);
  EXPECT_EQ(Best(pruned).config, Best(every).config);
  for (std::size_t k = 0; k < every.ranking.size(); ++k) {
    EXPECT_EQ(pruned.configs[pruned.ranking[k]].planner.iteration_ns, every.configs[every.ranking[k]].planner.iteration_ns);
  }
  // FP8 GEMMs beat bf16 on the same layout here: the best plan runs them.
  EXPECT_EQ(Best(every).config.precision, Precision::kFp8) << DescribeConfig(Best(every).config);
  // By default ZeRO-0 is left out where ZeRO-1 dominates it; the best is the same.
  c.options.exhaustive = false;
  c.options.zero = {};
  const SearchResult defaults = SearchSmall(c);
  for (const ConfigOutcome& out : defaults.configs) EXPECT_NE(out.config.zero, 0) << DescribeConfig(out.config);
  EXPECT_EQ(Best(defaults).planner.iteration_ns, Best(every).planner.iteration_ns);
}

// A target's framework that cannot run a setup (DeepSpeed: ZeRO-2/3, context and expert
// parallelism, FP8) has no configuration with it.
TEST(Search, TargetsOnlyGetSetupsTheirFrameworkRuns) {
  FrontierCase c;
  c.options.target = TargetKind::kDeepSpeed;
  c.options.node_limit = 0;
  c.options.plan_count = 4;
  const SearchResult r = SearchSmall(c);
  EXPECT_GT(r.target_refused, 0);
  EXPECT_FALSE(r.configs.empty());
  for (const ConfigOutcome& out : r.configs) {
    const std::string name = DescribeConfig(out.config);
    EXPECT_LE(out.config.zero, 1) << name;
    EXPECT_EQ(out.config.cp, 1) << name;
    EXPECT_EQ(out.config.ep, 1) << name;
    EXPECT_EQ(out.config.precision, Precision::kBf16) << name;
    EXPECT_EQ(out.config.vpp, 1) << name;
  }
}

TEST(Search, DescribesTheFrontierDimensions) {
  SearchConfig c;
  c.tp = 2;
  c.cp = 4;
  c.pp = 8;
  c.dp = 16;
  c.ep = 32;
  c.etp = 1;
  c.zero = 3;
  c.precision = Precision::kFp8;
  EXPECT_EQ(DescribeConfig(c), "tp 2, cp 4, pp 8, dp 16, ep 32, etp 1, vpp 1, mbs 1, ZeRO-3, FP8");
  c = SearchConfig{};
  c.zero = 1;
  EXPECT_EQ(DescribeConfig(c), "tp 1, pp 1, dp 1, vpp 1, mbs 1, distributed optimizer");
}

TEST(Search, BoundsAreSoundOnEveryConfiguration) {
  SmallCase c;
  c.options.exhaustive = true;
  const SearchResult every = SearchSmall(c);
  c.options.exhaustive = false;
  const SearchResult pruned = SearchSmall(c);
  for (std::size_t i = 0; i < every.configs.size(); ++i) {
    const ConfigOutcome& exact = every.configs[i];
    const ConfigOutcome& judged = pruned.configs[i];
    ASSERT_EQ(exact.config, judged.config);
    const std::string name = DescribeConfig(exact.config);
    if (exact.verdict == Verdict::kPlanned) {
      // The time bound never exceeds the optimum; the memory bound never rules out a plan that fits.
      EXPECT_LE(exact.time_bound_ns, exact.planner.iteration_ns) << name;
      EXPECT_LE(judged.time_bound_ns, exact.planner.iteration_ns) << name;
      EXPECT_LE(exact.memory_bound_bytes, c.device.memory_bytes) << name;
      EXPECT_NE(judged.verdict, Verdict::kMemoryBound) << name;
      if (judged.screen_ns > 0) {
        EXPECT_GE(judged.screen_ns, exact.planner.iteration_ns) << name;
      }
    }
    if (judged.verdict == Verdict::kDominated) {
      // A dominated configuration is never faster than the one that dominates it.
      const ConfigOutcome& by = every.configs[judged.dominated_by];
      if (exact.verdict == Verdict::kPlanned) {
        ASSERT_EQ(by.verdict, Verdict::kPlanned) << name;
        EXPECT_LE(by.planner.iteration_ns, exact.planner.iteration_ns) << name;
      }
    }
  }
}

TEST(Search, SameResultOnAnyNumberOfThreads) {
  SmallCase c;
  c.options.node_limit = 0;  // the search's default effort: incumbents only
  c.options.plan_count = 4;
  c.options.threads = 1;
  const SearchResult one = SearchSmall(c);
  c.options.threads = 3;
  const SearchResult three = SearchSmall(c);
  ASSERT_EQ(one.configs.size(), three.configs.size());
  for (std::size_t i = 0; i < one.configs.size(); ++i) {
    EXPECT_EQ(one.configs[i].verdict, three.configs[i].verdict) << DescribeConfig(one.configs[i].config);
    EXPECT_EQ(one.configs[i].screen_ns, three.configs[i].screen_ns);
    EXPECT_EQ(one.configs[i].planner.iteration_ns, three.configs[i].planner.iteration_ns);
    EXPECT_EQ(one.configs[i].planner.plan.stage_begin, three.configs[i].planner.plan.stage_begin);
    EXPECT_EQ(one.configs[i].planner.plan.option, three.configs[i].planner.plan.option);
  }
  EXPECT_EQ(one.ranking, three.ranking);
}

TEST(Search, MetricsOfTheBestConfiguration) {
  SmallCase c;
  const SearchResult r = SearchSmall(c);
  const ConfigOutcome& best = Best(r);
  const double seconds = static_cast<double>(best.planner.iteration_ns) / 1e9;
  EXPECT_DOUBLE_EQ(best.tokens_per_s, 16.0 * 2048 / seconds);
  // Model FLOPs: 6 per parameter in a matrix product (all but the embedding lookup) per token,
  // plus the attention scores as the causal kernel runs them (6 L s h per token, half the
  // square; 12 L s h with the whole square); norms and activations add a little.
  const ParameterCounts counts = CountParameters(c.model);
  const double tokens = 16.0 * 2048;
  const double matrices = 6.0 * static_cast<double>(counts.total - counts.embedding) * tokens;
  const double square = 12.0 * c.model.layers * 2048 * c.model.hidden * tokens;
  EXPECT_NEAR(r.model_flops / (matrices + square / 2), 1.0, 0.02);
  TrainingSetup setup = c.options.base;
  EXPECT_NEAR(ModelFlopsPerIteration(c.model, c.device, setup, AttentionFlops::kFull) / (matrices + square), 1.0, 0.02);
  EXPECT_DOUBLE_EQ(ModelFlopsPerIteration(c.model, c.device, setup, AttentionFlops::kCausal), r.model_flops);
  EXPECT_NEAR(best.mfu, r.model_flops / (seconds * 8 * c.device.peak_flops), 1e-12);
  EXPECT_GT(best.mfu, 0.05);
  EXPECT_LT(best.mfu, 0.8);
  EXPECT_LE(best.peak_memory_fraction, 1.0);
  EXPECT_GT(best.peak_memory_fraction, 0.0);
}

TEST(Search, RejectsOptionsWithAClearMessage) {
  SmallCase c;
  c.options.devices = 0;
  Result<SearchResult> r = SearchConfigurations(c.model, c.device, c.options);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("--devices 0"), std::string::npos) << r.error().message;
  c = SmallCase();
  c.options.base.global_batch_size = 3;  // no data-parallel size of 8 devices divides it but 1
  c.options.tp = {8};
  c.options.pp = {8};
  r = SearchConfigurations(c.model, c.device, c.options);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("no valid configuration"), std::string::npos) << r.error().message;
}

TEST(Search, RefusesNegativeCountsOtherThanMinusOne) {
  // --plan-count -5 used to plan every configuration (it hung on large spaces).
  auto message = [](const SmallCase& c) {
    const Result<SearchResult> r = SearchConfigurations(c.model, c.device, c.options);
    return r.ok() ? std::string("accepted") : r.error().message;
  };
  SmallCase c;
  c.options.plan_count = -5;
  EXPECT_NE(message(c).find("--plan-count -5 must be -1"), std::string::npos) << message(c);
  c = SmallCase();
  c.options.node_limit = -2;
  EXPECT_NE(message(c).find("--node-limit -2 must be -1"), std::string::npos) << message(c);
  c = SmallCase();
  c.options.threads = 5000;
  EXPECT_NE(message(c).find("--threads 5000"), std::string::npos) << message(c);
  c = SmallCase();
  c.options.top = 0;
  EXPECT_NE(message(c).find("--top 0"), std::string::npos) << message(c);
}

TEST(Search, TimeBudgetBoundsEveryStepOnAHugeModel) {
  BMPIPE_SLOW_TEST();
  // The reproducer: 100,000 layers; `search --time-budget 3` ran past 180 s.
  SmallCase c;
  c.model.layers = 99'998;  // with the embedding and the head: the most layers a problem may have
  c.device = DevicePreset("h100-80gb").value();
  c.options.devices = 64;
  c.options.base.global_batch_size = 64;
  c.options.base.seq = 4096;
  c.options.node_limit = 0;
  c.options.plan_count = 12;
  c.options.time_budget_s = 2;
  const auto began = std::chrono::steady_clock::now();
  const Result<SearchResult> r = SearchConfigurations(c.model, c.device, c.options);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  EXPECT_LT(seconds, c.options.time_budget_s + 5 * testing::kSlowdown);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r.value().budget_exhausted);
  EXPECT_GT(r.value().Count(Verdict::kNotPlanned), 0);
}

}  // namespace
}  // namespace bmpipe

namespace bmpipe {
namespace {

// The bound over the whole space stays sound and useful for every target when planner runs stop
// early: a target's planner stopped before a bound proves 0, the rank-load bound still holds
// (a Megatron search stopped by its budget reported "no configuration can be faster than 0 s").
TEST(Search, BoundHoldsForEveryTargetWhenPlannersStopEarly) {
  for (TargetKind target : {TargetKind::kAny, TargetKind::kMegatron, TargetKind::kTorchTitan}) {
    SmallCase c;
    c.options.target = target;
    c.options.node_limit = 0;
    c.options.plan_count = 2;
    const SearchResult r = SearchSmall(c);
    ASSERT_FALSE(r.ranking.empty()) << static_cast<int>(target);
    const double best = static_cast<double>(r.configs[r.fastest].planner.iteration_ns);
    EXPECT_GT(r.bound_ns, 0.5 * best) << static_cast<int>(target);
    EXPECT_LE(r.bound_ns, best) << static_cast<int>(target);
  }
}

}  // namespace
}  // namespace bmpipe

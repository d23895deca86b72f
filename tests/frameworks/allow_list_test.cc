// The allow-lists of the target table (frameworks/framework.h): a schedule or a setup feature a
// target does not list is refused by its planning and by its framework's export, with a message
// naming it and what does run it; and the lists are explicit sets, so a schedule added to the
// schedule table (or a feature added to the setup) is run by no framework until its row lists it.
#include "bmpipe/frameworks/framework.h"

#include <gtest/gtest.h>

#include "bmpipe/frameworks/formats.h"
#include "bmpipe/frameworks/settings.h"
#include "test_support.h"

namespace bmpipe {
namespace {

ScheduleSet KnownSchedules() {
  ScheduleSet known = 0;
  for (const ScheduleTraits& t : kSchedules) known |= ScheduleBit(t.kind);
  return known;
}

// A problem that runs `traits`'s schedule: 2 ranks (DualPipe pairs them), its fewest chunks, 8
// micro-batches, two layers a stage, backwards that split.
Problem ProblemOf(const ScheduleTraits& traits) {
  const int chunks = std::max(1, traits.min_chunks);
  Problem p = testing::UniformProblem(traits.kind, 2, chunks, 8, 4 * chunks, 10, 20);
  for (Layer& layer : p.layers) layer.weight_grad_ns = 8;  // what a split backward's W runs
  EXPECT_TRUE(ValidatePipeline(p.pipeline, p.num_layers()).ok()) << traits.name;
  return p;
}

TEST(AllowList, FrameworkTargetsListOnlyTheSchedulesAndFeaturesTheyName) {
  for (const Target& t : Targets()) {
    if (t.kind == TargetKind::kAny) {
      EXPECT_EQ(t.schedules, kEverySchedule);
      continue;
    }
    // No bit beyond the table: a schedule added to it is on no framework's list.
    EXPECT_EQ(t.schedules & ~KnownSchedules(), 0u) << t.name;
    EXPECT_EQ(t.setups & ~kEverySetupFeature, 0u) << t.name;
    EXPECT_NE(t.schedules, 0u) << t.name;
    // Every feature it does not list has its reason and fix.
    for (int i = 0; i < kSetupFeatures; ++i) {
      const SetupFeature f = static_cast<SetupFeature>(i);
      if ((t.setups & FeatureBit(f)) != 0) continue;
      bool reason = false;
      for (const Refusal& r : t.refusals) reason = reason || r.feature == f;
      EXPECT_TRUE(reason) << t.name << " " << InfoOf(f).key;
    }
  }
  // torchtitan takes a schedule by torch's class name.
  for (const ScheduleTraits& s : kSchedules) {
    if (TargetOf(TargetKind::kTorchTitan).Runs(s.kind)) {
      EXPECT_FALSE(s.torch_class.empty()) << s.name;
    }
  }
}

TEST(AllowList, AScheduleOffATargetsListIsRefusedByItsPlanningAndItsExport) {
  int refused = 0;
  for (const ScheduleTraits& s : kSchedules) {
    const Problem problem = ProblemOf(s);
    for (const Target& t : Targets()) {
      SCOPED_TRACE(std::string(t.name) + " / " + std::string(s.name));
      const Status runs = TargetRunsPipeline(t.kind, problem.pipeline);
      const Status settings = ForEachTargetSetting(problem, t.kind, [](const TargetSetting&) { return true; });
      PlannerOptions options;
      options.time_limit_s = 10;
      const Result<TargetPlan> planned = PlanForTarget(problem, t.kind, options);
      if (t.Runs(s.kind)) {
        EXPECT_TRUE(runs.ok()) << runs.error().message;
        EXPECT_TRUE(settings.ok()) << settings.error().message;
        EXPECT_TRUE(planned.ok()) << (planned.ok() ? "" : planned.error().message);
        continue;
      }
      ++refused;
      ASSERT_FALSE(runs.ok());
      const std::string& why = runs.error().message;
      EXPECT_NE(why.find("target " + std::string(t.name)), std::string::npos) << why;
      if (problem.pipeline.chunks == 1 || t.Interleaves()) {
        EXPECT_NE(why.find("'" + std::string(s.name) + "'"), std::string::npos) << why;
        // What does run it: every framework target on its list, or the note that none does.
        bool any_runner = false;
        for (const Target& other : Targets()) {
          if (!other.runs_on || !other.Runs(s.kind)) continue;
          any_runner = true;
          EXPECT_NE(why.find(std::string(other.name)), std::string::npos) << why;
        }
        if (!any_runner) {
          EXPECT_NE(why.find("--target any"), std::string::npos) << why;
        }
      } else {
        EXPECT_NE(why.find("no interleaved schedule"), std::string::npos) << why;
      }
      ASSERT_FALSE(settings.ok());
      EXPECT_EQ(settings.error().message, why);
      ASSERT_FALSE(planned.ok());
      EXPECT_EQ(planned.error().message, why);
      if (t.runs_on) {
        const Result<std::string> exported = ExportPlan(problem, EvenPlan(problem), *t.runs_on, t.kind);
        ASSERT_FALSE(exported.ok());
        EXPECT_EQ(exported.error().message, why);
      }
    }
  }
  EXPECT_GT(refused, 20);
}

// A training setup with `feature` and what it needs to be a valid run.
TrainingInfo SetupWith(SetupFeature f) {
  TrainingInfo t;
  t.tensor_parallel = 2;
  t.data_parallel = 4;
  t.sequence_parallel = true;
  t.distributed_optimizer = true;
  t.moe.experts = 8;
  t.moe.top_k = 2;
  t.moe.expert_ffn = 128;
  switch (f) {
    case SetupFeature::kContextParallel: t.context_parallel = 2; break;
    case SetupFeature::kExpertParallel: t.expert_parallel = 2; break;
    case SetupFeature::kShardedGradients: t.zero_stage = 3; break;
    case SetupFeature::kFp8: t.precision = "fp8"; break;
    case SetupFeature::kFp8Params: t.precision = "fp8"; t.fp8_params = true; break;
    case SetupFeature::kNoFp8TransposeCache: t.precision = "fp8"; t.no_fp8_transpose_cache = true; break;
    case SetupFeature::kBf16Grads: t.grad_dtype = "bf16"; break;
    case SetupFeature::kBf16Moments: t.optimizer_dtype = "bf16"; break;
    case SetupFeature::kTpCommOverlap: t.tp_comm_overlap = true; break;
    case SetupFeature::kOffloadOptimizer: t.offload_optimizer = true; break;
    case SetupFeature::kOffloadKeepsMaster: t.offload_optimizer = t.offload_keeps_master = true; break;
    case SetupFeature::kMoe: break;
    case SetupFeature::kMoeFlexDispatcher: t.moe.dispatcher = "flex"; break;
    case SetupFeature::kMoeCapacity: t.moe.capacity_factor = 1.25; break;
    case SetupFeature::kMoeCommOverlap: t.moe.comm_overlap = true; t.expert_parallel = 2; break;
    case SetupFeature::kMoeCudaGraphs: t.moe.cuda_graphs = true; t.moe.dispatcher = "flex"; break;
    case SetupFeature::kLinearMixers: t.linear_mixers = {"mamba2"}; break;
  }
  return t;
}

TEST(AllowList, ASetupFeatureOffATargetsListIsRefusedNamingItsKey) {
  int refused = 0;
  for (int i = 0; i < kSetupFeatures; ++i) {
    const SetupFeature f = static_cast<SetupFeature>(i);
    const TrainingInfo setup = SetupWith(f);
    EXPECT_NE(FeaturesOf(setup) & FeatureBit(f), 0u) << InfoOf(f).key;
    for (const Target& t : Targets()) {
      if ((t.setups & FeatureBit(f)) != 0) continue;
      ++refused;
      const Status runs = TargetRunsSetup(t.kind, setup);
      ASSERT_FALSE(runs.ok()) << t.name << " " << InfoOf(f).key;
      EXPECT_NE(runs.error().message.find("target " + std::string(t.name)), std::string::npos);
      // The feature's key, or that of a feature it needs which the target refuses first.
      bool named = false;
      for (int j = 0; j < kSetupFeatures; ++j) {
        const SetupFeature g = static_cast<SetupFeature>(j);
        const std::string key(InfoOf(g).key);
        if ((FeaturesOf(setup) & FeatureBit(g)) != 0 && (t.setups & FeatureBit(g)) == 0 &&
            runs.error().message.find(key.substr(key.find('.') + 1)) != std::string::npos) {
          named = true;
        }
      }
      EXPECT_TRUE(named) << runs.error().message;
    }
  }
  EXPECT_GT(refused, 10);
}

}  // namespace
}  // namespace bmpipe

#include "bmpipe/problem/plan.h"

#include <gtest/gtest.h>

#include "test_support.h"

namespace bmpipe {
namespace {

using testing::UniformProblem;

TEST(Plan, EvenPlanSpreadsTheRemainderOverTheFirstStages) {
  Problem p = UniformProblem(ScheduleKind::kOneFOneB, 3, 1, 3, 11, 1, 1);
  Plan plan = EvenPlan(p);
  EXPECT_EQ(plan.stage_begin, (std::vector<LayerIdx>{0, 4, 8, 11}));
  EXPECT_TRUE(ValidatePlan(p, plan).ok());
}

TEST(Plan, ValidateNamesTheProblem) {
  Problem p = UniformProblem(ScheduleKind::kOneFOneB, 2, 1, 2, 4, 1, 1);
  Plan plan{{0, 2, 4}, {0, 0, 0, 0}};
  EXPECT_TRUE(ValidatePlan(p, plan).ok());
  EXPECT_EQ(ValidatePlan(p, Plan{{0, 4}, {0, 0, 0, 0}}).error().message,
            "the plan has 1 stages but the problem has 2 (ranks 2 x chunks 1)");
  EXPECT_EQ(ValidatePlan(p, Plan{{0, 2, 3}, {0, 0, 0, 0}}).error().message,
            "the stages cover layers 0..2 but the problem has 4 layers (0..3)");
  EXPECT_EQ(ValidatePlan(p, Plan{{0, 2, 4}, {0, 1, 0, 0}}).error().message, "layer 1 has option index 1; it has 1 options");
  EXPECT_EQ(ValidatePlan(p, Plan{{1, 2, 4}, {0, 0, 0, 0}}).error().message, "stage 0 starts at layer 1; it must start at layer 0");
}

TEST(Plan, StageCostsSumLayersAndTakeTheLargestTransient) {
  Problem p = UniformProblem(ScheduleKind::kOneFOneB, 2, 1, 2, 3, 0, 0);
  p.reserved_bytes = 5;
  p.layers[0].options[0] = LayerOption{"a", 10, 20, 3, 100, 7};
  p.layers[1].options[0] = LayerOption{"b", 1, 2, 0, 10, 9};
  p.layers[1].p2p_ns = 44;
  p.layers[1].static_bytes = 1000;
  p.layers[1].update_ns = 6;
  Plan plan{{0, 2, 3}, {0, 0, 0}};
  StageCost c = ComputeStageCost(p, plan, 0);
  EXPECT_EQ(c.forward_ns, 11);
  EXPECT_EQ(c.backward_ns, 25);  // 20 + 3 recompute + 2
  EXPECT_EQ(c.recompute_ns, 3);
  EXPECT_EQ(c.saved_bytes, 110);
  EXPECT_EQ(c.transient_bytes, 9);
  EXPECT_EQ(c.p2p_out_ns, 44);
  std::vector<RankCost> ranks = ComputeRankCosts(p, plan);
  EXPECT_EQ(ranks[0].static_bytes, 1005);
  EXPECT_EQ(ranks[0].update_ns, 6);
  EXPECT_EQ(ranks[1].static_bytes, 5);
}

}  // namespace
}  // namespace bmpipe

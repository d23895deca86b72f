#include "bmpipe/io/plan_json.h"

#include <gtest/gtest.h>

#include "bmpipe/problem/problem_reader.h"
#include "test_support.h"

namespace bmpipe {
namespace {

Problem Tiny() { return LoadProblem(testing::SourcePath("examples/tiny/problem.json")).value(); }

Json TinyPlan() {
  return LoadDocument(testing::SourcePath("examples/tiny/plan.json")).value();
}

std::string ErrorOf(const Json& doc) {
  Result<PlanDocument> r = ReadPlan(doc, Tiny(), "plan.json");
  EXPECT_FALSE(r.ok());
  return r.ok() ? "" : r.error().message;
}

TEST(PlanJson, ReadsStagesAndOptions) {
  Result<PlanDocument> r = ReadPlan(TinyPlan(), Tiny(), "plan.json");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r.value().plan.stage_begin, (std::vector<LayerIdx>{0, 3, 6, 9, 12}));
  EXPECT_EQ(r.value().plan.option, (std::vector<OptionIdx>{0, 2, 2, 1, 1, 1, 0, 0, 0, 0, 0, 0}));
  EXPECT_FALSE(r.value().solver.has_value());
}

TEST(PlanJson, WrittenPlanReadsBackToTheSamePlanAndBytes) {
  const Problem problem = Tiny();
  const Plan plan = ReadPlan(TinyPlan(), problem, "plan.json").value().plan;
  const SimResult sim = SimulatePlan(problem, plan).value();
  const SolverInfo solver{"test", ModelStatus::kOptimal, 0.25};
  const std::string text = PlanJsonText(problem, plan, sim, solver);
  Result<PlanDocument> back = ReadPlan(Json::parse(text), problem, "written.json");
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back.value().plan.stage_begin, plan.stage_begin);
  EXPECT_EQ(back.value().plan.option, plan.option);
  ASSERT_TRUE(back.value().solver.has_value());
  EXPECT_EQ(back.value().solver->name, "test");
  EXPECT_EQ(back.value().solver->status, ModelStatus::kOptimal);
  EXPECT_EQ(PlanJsonText(problem, back.value().plan, SimulatePlan(problem, back.value().plan).value(),
                         *back.value().solver),
            text);
}

TEST(PlanJson, WrittenFieldsAreTheSimulatorsValues) {
  const Problem problem = Tiny();
  const Plan plan = ReadPlan(TinyPlan(), problem, "plan.json").value().plan;
  const SimResult sim = SimulatePlan(problem, plan).value();
  const Json j = PlanToJson(problem, plan, sim, SolverInfo{"x", ModelStatus::kFeasible, 0});
  EXPECT_EQ(j["iteration_time_ns"], sim.iteration_ns);
  EXPECT_DOUBLE_EQ(j["iteration_time_s"].get<double>(), ToSeconds(sim.iteration_ns));
  ASSERT_EQ(j["ranks"].size(), 4u);
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(j["ranks"][r]["rank"], r);
    EXPECT_EQ(j["ranks"][r]["peak_memory_bytes"], sim.ranks[r].peak_memory_bytes);
  }
  EXPECT_EQ(j["stages"][2]["layers"][0], Json({{"index", 6}, {"name", "decoder"}, {"option", "none"}}));
  EXPECT_EQ(j["solver"]["status"], "feasible");
}

TEST(PlanJson, NonContiguousLayersAreRejected) {
  Json doc = TinyPlan();
  doc["stages"][1]["layers"][1]["index"] = 5;
  EXPECT_EQ(ErrorOf(doc),
            "plan.json: stages[1].layers[1].index = 5: expected layer 4, the one after the previous layer; stages must "
            "cover the layers contiguously, in order, each exactly once");
  Json first = TinyPlan();
  first["stages"][0]["layers"][0]["index"] = 1;
  EXPECT_EQ(ErrorOf(first), "plan.json: stages[0].layers[0].index = 1: the first stage must start at layer 0");
}

TEST(PlanJson, MissingLayersAtTheEndAreRejected) {
  Json doc = TinyPlan();
  doc["stages"][3]["layers"].erase(2);
  EXPECT_EQ(ErrorOf(doc),
            "plan.json: stages: the stages cover layers 0..10 but the problem has 12 layers (0..11); assign every layer "
            "to a stage");
}

TEST(PlanJson, EmptyStageIsRejected) {
  Json doc = TinyPlan();
  doc["stages"][2]["layers"] = Json::array();
  EXPECT_EQ(ErrorOf(doc), "plan.json: stages[2].layers = []: the list is empty; give at least one entry");
}

TEST(PlanJson, WrongNumberOfStagesIsRejected) {
  Json doc = TinyPlan();
  doc["stages"].erase(3);
  EXPECT_EQ(ErrorOf(doc),
            "plan.json: stages: the plan has 3 stages but the problem has 4 (pipeline.ranks 4 x chunks 1); "
            "give one entry per stage in pipeline order");
}

TEST(PlanJson, UnknownOptionIsRejectedWithTheChoices) {
  Json doc = TinyPlan();
  doc["stages"][1]["layers"][0]["option"] = "selectiv";
  EXPECT_EQ(ErrorOf(doc),
            "plan.json: stages[1].layers[0].option = \"selectiv\": layer 'decoder' has no such option; did you mean "
            "'selective'?; its options are 'none', 'selective', 'full'");
}

TEST(PlanJson, WrongNameRankOrChunkIsRejected) {
  Json name = TinyPlan();
  name["stages"][0]["layers"][0]["name"] = "decoder";
  EXPECT_EQ(ErrorOf(name), "plan.json: stages[0].layers[0].name = \"decoder\": layer 0 of the problem is named 'embedding'");
  Json rank = TinyPlan();
  rank["stages"][1]["rank"] = 2;
  EXPECT_EQ(ErrorOf(rank), "plan.json: stages[1].rank = 2: stage 1 runs on rank 1 (stage mod pipeline.ranks)");
  Json unknown = TinyPlan();
  unknown["stages"][1]["ranks"] = 2;
  EXPECT_NE(ErrorOf(unknown).find("plan.json: stages[1]: unknown key 'ranks'; did you mean 'rank'?"), std::string::npos);
}

TEST(PlanJson, InterleavedStagesAreChunkMajor) {
  Problem p = testing::UniformProblem(ScheduleKind::kInterleavedOneFOneB, 2, 2, 2, 4, 10, 20);
  Plan plan = testing::OneLayerPerStage(p);
  const Json j = PlanToJson(p, plan, SimulatePlan(p, plan).value(), SolverInfo{"x", ModelStatus::kFeasible, 0});
  EXPECT_EQ(j["stages"][2]["rank"], 0);
  EXPECT_EQ(j["stages"][2]["chunk"], 1);
  EXPECT_EQ(j["stages"][3]["rank"], 1);
  EXPECT_EQ(j["pipeline"]["schedule"], "interleaved-1f1b");
}

}  // namespace
}  // namespace bmpipe

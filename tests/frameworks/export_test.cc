// Exports to the launchers: golden files per format (1F1B with uneven first and last stages,
// interleaved), the MindFormers round trip, and what a format cannot express.
#include "bmpipe/frameworks/formats.h"

#include <gtest/gtest.h>

#include "bmpipe/frameworks/mindformers/mindformers.h"
#include "bmpipe/frameworks/settings.h"
#include "bmpipe/io/plan_json.h"
#include "bmpipe/problem/problem_reader.h"
#include "bmpipe/sim/simulator.h"
#include "test_support.h"

namespace bmpipe {
namespace {

struct Case {
  const char* name;
  const char* problem;
  const char* plan;
};

const Case kCases[] = {
    {"tiny", "examples/tiny/problem.json", "examples/tiny/plan.json"},
    {"demo", "examples/mindformers-demo/problem.yaml", "examples/mindformers-demo/tool-plan.json"},
    {"demo-vpp3", "examples/mindformers-demo/problem-vpp3.yaml", "examples/mindformers-demo/tool-plan-vpp3.json"},
};

TEST(Export, GoldenFilesPerFormat) {
  for (const Case& c : kCases) {
    const Problem problem = LoadProblem(testing::SourcePath(c.problem)).value();
    const Plan plan = LoadPlan(testing::SourcePath(c.plan), problem).value().plan;
    for (const std::string& name : FormatNames()) {
      SCOPED_TRACE(std::string(c.name) + " " + name);
      const Result<std::string> text = ExportPlan(problem, plan, ParseFormat(name).value());
      if (name == "deepspeed" && problem.pipeline.chunks > 1) {
        ASSERT_FALSE(text.ok());
        EXPECT_NE(text.error().message.find("no interleaved schedule"), std::string::npos);
        continue;
      }
      ASSERT_TRUE(text.ok()) << text.error().message;
      EXPECT_TRUE(testing::MatchesGolden(std::string("export_") + c.name + "." + name + ".txt", text.value()));
    }
  }
}

// The MindFormers lists of a plan read back to the same stages, the same option counts per
// stage and the same simulated time; the tool's own lists give the tool's own results.
TEST(Export, MindFormersRoundTrips) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.name);
    const Problem problem = LoadProblem(testing::SourcePath(c.problem)).value();
    const Plan plan = LoadPlan(testing::SourcePath(c.plan), problem).value().plan;
    const std::string text = ExportPlan(problem, plan, FrameworkId::kMindFormers).value();
    if (!TargetRunsPlan(problem, plan, TargetKind::kMindFormers)) {
      // tiny's 'selective' (core attention) is not MindFormers' select (the MLP activation).
      EXPECT_NE(text.find("has no MindFormers list"), std::string::npos) << text;
      continue;
    }
    const Plan back = ReadMindFormersPlan(ParseDocument(text, "mf.yaml").value(), problem, "mf.yaml").value();
    EXPECT_EQ(back.stage_begin, plan.stage_begin);
    for (StageIdx s = 0; s < plan.num_stages(); ++s) {
      std::map<OptionIdx, int> a, b;
      for (LayerIdx l = plan.begin(s); l < plan.end(s); ++l) {
        ++a[plan.option[l]];
        ++b[back.option[l]];
      }
      EXPECT_EQ(a, b) << "stage " << s;
    }
    EXPECT_EQ(SimulatePlan(problem, back).value().iteration_ns, SimulatePlan(problem, plan).value().iteration_ns);
  }
  const Problem demo = LoadProblem(testing::SourcePath("examples/mindformers-demo/problem.yaml")).value();
  const Plan tool = LoadAnyPlan(testing::SourcePath("examples/mindformers-demo/tool-plan-mindformers.yaml"), std::nullopt, demo).value().document.plan;
  EXPECT_EQ(SimulatePlan(demo, tool).value().iteration_ns, 56'367'000'000);
  const Problem vpp3 = LoadProblem(testing::SourcePath("examples/mindformers-demo/problem-vpp3.yaml")).value();
  const Plan tool3 =
      LoadAnyPlan(testing::SourcePath("examples/mindformers-demo/tool-plan-vpp3-mindformers.yaml"), std::nullopt, vpp3).value().document.plan;
  const Plan tool3_json = LoadPlan(testing::SourcePath("examples/mindformers-demo/tool-plan-vpp3.json"), vpp3).value().plan;
  EXPECT_EQ(SimulatePlan(vpp3, tool3).value().iteration_ns, SimulatePlan(vpp3, tool3_json).value().iteration_ns);
  EXPECT_EQ(SimulatePlan(vpp3, tool3).value().iteration_ns, 45'240'300'000);  // 45.240 s, the tool's run 02
}

TEST(Export, MindFormersListsAreChecked) {
  const Problem demo = LoadProblem(testing::SourcePath("examples/mindformers-demo/problem.yaml")).value();
  auto error = [&](const std::string& yaml) {
    const Result<Plan> r = ReadMindFormersPlan(ParseDocument(yaml, "x.yaml").value(), demo, "x.yaml");
    return r.ok() ? std::string("(no error)") : r.error().message;
  };
  const std::string head = "parallel_config: {pipeline_stage: 16, micro_batch_num: 16}\nmodel: {model_config: {num_layers: 96, ";
  EXPECT_NE(error(head + "offset: [1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]}}").find("offsets sum to 1"),
            std::string::npos);
  EXPECT_NE(error(head + "offset: [0, 0]}}").find("needs 16 entries"), std::string::npos);
  EXPECT_NE(error("parallel_config: {pipeline_stage: 8}\nmodel: {model_config: {offset: 0}}").find("16 pipeline ranks"),
            std::string::npos);
  EXPECT_NE(error(head + "offset: 0}}\nrecompute_config: {recompute: [1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]}")
                .find("recomputes full"),
            std::string::npos);
}

TEST(Export, ScheduleCsvIsTheSimulatedOrder) {
  const Problem problem = LoadProblem(testing::SourcePath("examples/mindformers-demo/problem-vpp3.yaml")).value();
  const Plan plan = LoadPlan(testing::SourcePath("examples/mindformers-demo/tool-plan-vpp3.json"), problem).value().plan;
  const std::string csv = ExportPlan(problem, plan, FrameworkId::kTorch).value();
  int rows = 0;
  std::stringstream ss(csv);
  std::string row;
  while (std::getline(ss, row)) {
    ++rows;
    EXPECT_EQ(std::count(row.begin(), row.end(), ',') + 1, 2 * 16 * 3);  // F and B of m x v chunk-micro-batches
  }
  EXPECT_EQ(rows, 16);
  EXPECT_EQ(csv.substr(0, 4), "0F0,");
}

}  // namespace
}  // namespace bmpipe

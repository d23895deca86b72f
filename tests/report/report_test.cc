#include "bmpipe/report/report.h"

#include <gtest/gtest.h>

#include "bmpipe/io/plan_json.h"
#include "bmpipe/problem/problem_reader.h"
#include "test_support.h"

namespace bmpipe {
namespace {

TEST(Report, DescribesNamesAndOptionMix) {
  Problem p = LoadProblem(testing::SourcePath("examples/tiny/problem.json")).value();
  Plan plan = LoadPlan(testing::SourcePath("examples/tiny/plan.json"), p).value().plan;
  EXPECT_EQ(DescribeLayerNames(p, 0, 3), "embedding, decoder x2");
  EXPECT_EQ(DescribeLayerNames(p, 9, 12), "decoder x2, lm_head");
  EXPECT_EQ(DescribeOptionMix(p, plan, 0), "none, full x2");
  EXPECT_EQ(DescribeOptionMix(p, plan, 1), "selective x3");
}

TEST(Report, FlagsRanksOverCapacity) {
  Problem p = LoadProblem(testing::SourcePath("examples/tiny/problem.json")).value();
  p.memory_bytes = 10'000'000'000;
  Plan plan = LoadPlan(testing::SourcePath("examples/tiny/plan.json"), p).value().plan;
  SimResult sim = SimulatePlan(p, plan).value();
  const std::string report = FormatReport(ReportHeader{"t", {}}, p, plan, sim);
  EXPECT_NE(report.find("Memory           EXCEEDS capacity on ranks 1, 2, 3\n"), std::string::npos) << report;
  EXPECT_NE(report.find("  OVER\n"), std::string::npos);
}

}  // namespace
}  // namespace bmpipe

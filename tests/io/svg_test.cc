// The timeline SVG: one box per op, recomputation marked where the plan recomputes, memory lanes
// against capacity, same bytes every time. (scripts/render-svg.sh renders it with Chromium.)
#include "bmpipe/io/svg.h"

#include <gtest/gtest.h>

#include "bmpipe/io/plan_json.h"
#include "bmpipe/problem/problem_reader.h"
#include "test_support.h"

namespace bmpipe {
namespace {

int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(Svg, OneBoxPerOpAndMemoryLanes) {
  const Problem problem = LoadProblem(testing::SourcePath("examples/tiny/problem.json")).value();
  const Plan plan = LoadPlan(testing::SourcePath("examples/tiny/plan.json"), problem).value().plan;
  SimOptions options;
  options.record_memory = true;
  const SimResult sim = SimulatePlan(problem, plan, options).value();
  const std::string svg = TimelineSvg(problem, "tiny", {{"the plan", plan, sim}});
  EXPECT_EQ(svg.rfind("<svg ", 0), 0u);
  EXPECT_EQ(svg.substr(svg.size() - 7), "</svg>\n");
  // 4 ranks x 8 micro-batches x (F + B) boxes, one stroke each.
  EXPECT_EQ(Count(svg, "stroke=\"white\" stroke-width=\"0.3\""), 4 * 8 * 2);
  // Stages 0 (full) and 1 (selective) recompute in each of their 8 backwards.
  EXPECT_EQ(Count(svg, "fill=\"url(#recompute)\""), 2 * 8);
  // One memory area and one capacity line per rank.
  EXPECT_EQ(Count(svg, "stroke=\"red\""), 4);
  EXPECT_NE(svg.find("iteration 1.051 s"), std::string::npos);
  EXPECT_EQ(TimelineSvg(problem, "tiny", {{"the plan", plan, sim}}), svg);  // deterministic
}

}  // namespace
}  // namespace bmpipe

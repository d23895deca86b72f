// The timeline SVG: one box per op, recomputation marked where the plan recomputes, memory lanes
// against capacity, same bytes every time. (scripts/render-svg.sh renders it with Chromium.)
#include "bmpipe/report/svg.h"

#include <tuple>

#include <gtest/gtest.h>

#include "bmpipe/io/plan_json.h"
#include "bmpipe/problem/problem_reader.h"
#include "bmpipe/schedule/schedule.h"
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
  const std::string svg = TimelineSvg(problem, "tiny", {{"the plan", plan, sim}}).value();
  EXPECT_EQ(svg.rfind("<svg ", 0), 0u);
  EXPECT_EQ(svg.substr(svg.size() - 7), "</svg>\n");
  // 4 ranks x 8 micro-batches x (F + B) boxes, one stroke each.
  EXPECT_EQ(Count(svg, "stroke=\"white\" stroke-width=\"0.3\""), 4 * 8 * 2);
  // Stages 0 (full) and 1 (selective) recompute in each of their 8 backwards.
  EXPECT_EQ(Count(svg, "fill=\"url(#recompute)\""), 2 * 8);
  // One memory area and one capacity line per rank.
  EXPECT_EQ(Count(svg, "stroke=\"red\""), 4);
  EXPECT_NE(svg.find("iteration 1.051 s"), std::string::npos);
  EXPECT_EQ(TimelineSvg(problem, "tiny", {{"the plan", plan, sim}}).value(), svg);  // deterministic
}

// Overlapped pairs: a strip per all-to-all that runs beside the pair's other op, and the legend.
TEST(Svg, OverlappedPairsShowTheirAllToAll) {
  const std::string dir = "tests/golden/exports/qwen3-30b-a3b-pp4-vpp2-pairs-megatron/";
  const Problem problem = LoadProblem(testing::SourcePath(dir + "problem.json")).value();
  const Plan plan = LoadPlan(testing::SourcePath(dir + "plan.json"), problem).value().plan;
  SimOptions options;
  options.record_memory = true;
  const SimResult sim = SimulatePlan(problem, plan, options).value();
  const std::string svg = TimelineSvg(problem, "pairs", {{"the plan", plan, sim}}).value();
  std::size_t spans = 0;
  for (const RankResult& r : sim.ranks) spans += r.pair_comm.size();
  EXPECT_GT(spans, 0u);
  EXPECT_EQ(Count(svg, "fill=\"rgb(190,60,160)\"><title>"), static_cast<int>(spans));
  EXPECT_NE(svg.find("magenta strip: an overlapped pair's all-to-all"), std::string::npos);
}

TEST(Svg, AWindowAndSomeRanksDrawOnlyWhatIsInThem) {
  const Problem problem = LoadProblem(testing::SourcePath("examples/tiny/problem.json")).value();
  const Plan plan = LoadPlan(testing::SourcePath("examples/tiny/plan.json"), problem).value().plan;
  SimOptions options;
  options.record_memory = true;
  const SimResult sim = SimulatePlan(problem, plan, options).value();
  const TimelineView view = ParseTimelineView("0.2:0.6", "1,3", problem).value();
  EXPECT_EQ(view.begin_ns, 200'000'000);
  EXPECT_EQ(view.end_ns, 600'000'000);
  EXPECT_EQ(view.ranks, (std::vector<RankIdx>{1, 3}));
  const std::string svg = TimelineSvg(problem, "tiny", {{"the plan", plan, sim}}, view).value();
  const Schedule schedule(problem.pipeline);
  int inside = 0;
  for (RankIdx r : view.ranks) {
    for (const OpTiming& t : sim.op_timing[r]) inside += t.end_ns > view.begin_ns && t.start_ns < view.end_ns ? 1 : 0;
  }
  ASSERT_GT(inside, 0);
  // One box, with its tooltip, per op of ranks 1 and 3 that overlaps the window.
  EXPECT_EQ(Count(svg, "stroke=\"white\" stroke-width=\"0.3\"><title>"), inside);
  EXPECT_EQ(Count(svg, "<title>rank 0:"), 0);
  EXPECT_EQ(Count(svg, "<title>rank 2:"), 0);
  EXPECT_EQ(Count(svg, "stroke=\"red\""), 2);  // two memory lanes
  EXPECT_NE(svg.find("200.000 ms to 600.000 ms. 2 of 4 ranks."), std::string::npos);
  EXPECT_NE(svg.find("<title>rank 3: peak "), std::string::npos);
  // The whole view: every op has its tooltip.
  const std::string all = TimelineSvg(problem, "tiny", {{"the plan", plan, sim}}).value();
  EXPECT_EQ(Count(all, "stroke-width=\"0.3\"><title>rank "), 4 * 8 * 2);
}

TEST(Svg, BadViewsAreRefusedWithTheFix) {
  const Problem problem = LoadProblem(testing::SourcePath("examples/tiny/problem.json")).value();
  for (const auto& [window, ranks, says] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"5", "", "START:END in seconds"},
           {"2:1", "", "START before END"},
           {"a:b", "", "e.g. 10:12.5"},
           {"", "0-9", "within 0-3"},
           {"", "2-1", "not a rank or a range"},
           {"", "1,,2", "not a rank"}}) {
    const Result<TimelineView> view = ParseTimelineView(window, ranks, problem);
    ASSERT_FALSE(view.ok()) << window << " " << ranks;
    EXPECT_NE(view.error().message.find(says), std::string::npos) << view.error().message;
  }
  EXPECT_TRUE(ParseTimelineView(":0.5", "", problem).ok());
  EXPECT_TRUE(ParseTimelineView("0.5:", "3", problem).ok());
}

}  // namespace
}  // namespace bmpipe

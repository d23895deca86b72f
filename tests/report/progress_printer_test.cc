// Progress lines: what a person sees on a terminal and what a program reads otherwise.
#include "bmpipe/report/progress_printer.h"

#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace bmpipe {
namespace {

Progress Searching() {
  Progress p{"branch and bound"};
  p.best_s = 39.2679;
  p.bound_s = 36.9388;
  p.nodes = 12;
  return p;
}

TEST(Progress, TextSaysPhaseBestBoundGapAndNodes) {
  EXPECT_EQ(ProgressText("plan", Searching(), 3.14),
            "bmpipe plan: branch and bound, best 39.268 s, bound 36.939 s (gap 5.93%), 12 nodes, 3.1 s");
  Progress counted{"planning configurations"};
  counted.done = 3;
  counted.total = 12;
  EXPECT_EQ(ProgressText("search", counted, 61), "bmpipe search: planning configurations, 3 of 12, 61.0 s");
}

TEST(Progress, JsonLinesCarryOnlyWhatIsKnown) {
  const nlohmann::json j = nlohmann::json::parse(ProgressJson("plan", Searching(), 3.14159));
  EXPECT_EQ(j["progress"], "plan");
  EXPECT_EQ(j["phase"], "branch and bound");
  EXPECT_DOUBLE_EQ(j["elapsed_s"].get<double>(), 3.142);
  EXPECT_DOUBLE_EQ(j["best_s"].get<double>(), 39.2679);
  EXPECT_DOUBLE_EQ(j["bound_s"].get<double>(), 36.9388);
  EXPECT_NEAR(j["gap"].get<double>(), (39.2679 - 36.9388) / 39.2679, 1e-6);
  EXPECT_EQ(j["nodes"], 12);
  EXPECT_FALSE(j.contains("done"));
  const nlohmann::json quick = nlohmann::json::parse(ProgressJson("plan", Progress{"quick \"plan\""}, 0));
  EXPECT_EQ(quick["phase"], "quick \"plan\"");  // escaped
  EXPECT_FALSE(quick.contains("best_s"));
  EXPECT_FALSE(quick.contains("gap"));
}

TEST(Progress, ModeFollowsTheTerminal) {
  EXPECT_EQ(ProgressModeOf("auto", true), ProgressMode::kBar);
  EXPECT_EQ(ProgressModeOf("auto", false), ProgressMode::kLines);
  EXPECT_EQ(ProgressModeOf("lines", true), ProgressMode::kLines);
  EXPECT_EQ(ProgressModeOf("none", true), ProgressMode::kNone);
}

TEST(Progress, QuietAtFirstThenLinesWhenSomethingChanged) {
  std::ostringstream quiet_out;
  {
    ProgressPrinter quiet(quiet_out, ProgressMode::kLines, "plan", /*quiet_s=*/3600);
    quiet.Report(Searching());
  }
  EXPECT_EQ(quiet_out.str(), "");  // work that ends within its quiet time prints nothing

  std::ostringstream out;
  ProgressPrinter printer(out, ProgressMode::kLines, "plan", /*quiet_s=*/0, /*interval_s=*/0);
  printer.Report(Searching());
  printer.Report(Searching());  // nothing new
  Progress better = Searching();
  better.best_s = 38;
  printer.Report(better);
  printer.Finish();
  printer.Report(better);  // after Finish: nothing
  std::istringstream lines(out.str());
  std::string line;
  int count = 0;
  while (std::getline(lines, line)) {
    EXPECT_EQ(nlohmann::json::parse(line)["progress"], "plan");
    ++count;
  }
  EXPECT_EQ(count, 2);
  EXPECT_EQ(printer.Sink() != nullptr, true);
  ProgressPrinter none(out, ProgressMode::kNone, "plan");
  EXPECT_EQ(none.Sink(), nullptr);
}

TEST(Progress, TheBarIsRedrawnInPlaceAndClearedAtTheEnd) {
  std::ostringstream out;
  {
    ProgressPrinter bar(out, ProgressMode::kBar, "plan", /*quiet_s=*/0);
    bar.Report(Searching());
  }
  const std::string text = out.str();
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text.front(), '\r');
  EXPECT_EQ(text.find('\n'), std::string::npos);
  EXPECT_EQ(text.back(), '\r');  // cleared: spaces over the line, then back to its start
  EXPECT_NE(text.find("branch and bound"), std::string::npos);
}

}  // namespace
}  // namespace bmpipe

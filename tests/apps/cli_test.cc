// The command line as a user runs it: exit codes, messages, output files, golden outputs.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include <gtest/gtest.h>

#include "test_support.h"

namespace bmpipe {
namespace {

using testing::MatchesGolden;
using testing::RunBmpipe;

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

const char* kTiny = "--problem examples/tiny/problem.json --plan examples/tiny/plan.json";

TEST(Cli, HelpExplainsTheCommands) {
  testing::CommandResult r = RunBmpipe("--help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("simulate"), std::string::npos);
  EXPECT_NE(r.out.find("Exit codes"), std::string::npos);
  testing::CommandResult sub = RunBmpipe("simulate --help");
  EXPECT_EQ(sub.exit_code, 0);
  EXPECT_NE(sub.out.find("--problem"), std::string::npos);
}

TEST(Cli, NoCommandOrUnknownOptionIsAUsageError) {
  EXPECT_EQ(RunBmpipe("").exit_code, 2);
  testing::CommandResult r = RunBmpipe("simulate --problem examples/tiny/problem.json --bogus");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--bogus"), std::string::npos);
}

TEST(Cli, SimulateReport) {
  testing::CommandResult r = RunBmpipe(std::string("simulate ") + kTiny);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(MatchesGolden("simulate_tiny.txt", r.out));
}

TEST(Cli, SimulateJson) {
  testing::CommandResult r = RunBmpipe(std::string("simulate --json ") + kTiny);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(MatchesGolden("simulate_tiny.json", r.out));
  EXPECT_EQ(RunBmpipe(std::string("simulate --json ") + kTiny).out, r.out);  // same bytes every run
}

TEST(Cli, SimulateMindFormersDemo) {
  testing::CommandResult r = RunBmpipe(
      "simulate --problem examples/mindformers-demo/problem.yaml --plan examples/mindformers-demo/tool-plan.json");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Iteration time   56.367 s\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Loss vs useful   1.1088 = ideal 0.9375 + imbalance 0.1231 + recompute 0.0481"),
            std::string::npos);
}

TEST(Cli, OutWritesTheJsonAndNothingOnError) {
  const std::string dir = testing::MakeTempDir();
  const std::string out = dir + "/plan.json";
  testing::CommandResult ok = RunBmpipe(std::string("simulate ") + kTiny + " --out '" + out + "'");
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_EQ(testing::ReadFile(out), RunBmpipe(std::string("simulate --json ") + kTiny).out);
  std::remove(out.c_str());

  // A plan that names an unknown option: exit 2, a precise message, no output file.
  const std::string bad_plan = dir + "/bad.json";
  std::string text = testing::ReadFile(testing::SourcePath("examples/tiny/plan.json"));
  text.replace(text.find("\"selective\""), 11, "\"offload\"");
  std::ofstream(bad_plan) << text;
  testing::CommandResult bad =
      RunBmpipe("simulate --problem examples/tiny/problem.json --plan '" + bad_plan + "' --out '" + out + "'");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("stages[1].layers[0].option = \"offload\": layer 'decoder' has no such option"),
            std::string::npos)
      << bad.err;
  EXPECT_FALSE(Exists(out));
  std::remove(bad_plan.c_str());
  rmdir(dir.c_str());
}

TEST(Cli, UnreadableAndUnwritableFilesExitWithThree) {
  testing::CommandResult missing = RunBmpipe("simulate --problem /nonexistent.json");
  EXPECT_EQ(missing.exit_code, 3);
  EXPECT_EQ(missing.err, "bmpipe: error: /nonexistent.json: cannot open file for reading\n");
  testing::CommandResult unwritable = RunBmpipe(std::string("simulate ") + kTiny + " --out /nonexistent/dir/plan.json");
  EXPECT_EQ(unwritable.exit_code, 3);
  EXPECT_NE(unwritable.err.find("/nonexistent/dir/plan.json: cannot create the file"), std::string::npos);
}

TEST(Cli, InvalidProblemExitsWithTwo) {
  const std::string dir = testing::MakeTempDir();
  const std::string path = dir + "/p.yaml";
  std::ofstream(path) << "pipeline: {stages: 2, micro_batches: 0, schedule: 1f1b}\n";
  testing::CommandResult r = RunBmpipe("simulate --problem '" + path + "'");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("pipeline.micro_batches = 0"), std::string::npos) << r.err;
  std::remove(path.c_str());
  rmdir(dir.c_str());
}

TEST(Cli, WithoutAPlanSimulatesTheEvenSplit) {
  testing::CommandResult r = RunBmpipe("simulate --problem examples/tiny/problem.json");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("even split, first option of every layer (no --plan given)"), std::string::npos);
}

}  // namespace
}  // namespace bmpipe

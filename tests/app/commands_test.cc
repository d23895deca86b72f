// The application layer: every command's option table (flags and keywords unique, each flag on the
// command line), keywords read as the command line reads flags, and the name lists of --help
// derived from the framework and target tables, written nowhere else by hand.
#include "bmpipe/app/command.h"

#include <filesystem>
#include <regex>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include "bmpipe/core/text.h"
#include "bmpipe/frameworks/formats.h"
#include "test_support.h"

namespace bmpipe::app {
namespace {

std::vector<std::string> FlagNames(const Option& o) {
  std::vector<std::string> names;
  for (std::size_t at = 0; at < o.flags.size();) {
    std::size_t end = o.flags.find(',', at);
    if (end == std::string::npos) end = o.flags.size();
    names.push_back(o.flags.substr(at, end - at));
    at = end + 1;
  }
  return names;
}

TEST(Commands, TablesHaveUniqueFlagsAndKeywords) {
  for (const Command& c : Commands()) {
    SCOPED_TRACE(std::string(c.name));
    const std::unique_ptr<Invocation> invocation = c.make();
    std::set<std::string> flags, keys;
    for (const Option& o : invocation->options().options()) {
      EXPECT_FALSE(o.flags.empty() && o.key.empty()) << o.help;
      for (const std::string& f : FlagNames(o)) EXPECT_TRUE(flags.insert(f).second) << f;
      if (!o.key.empty()) {
        EXPECT_TRUE(keys.insert(o.key).second) << o.key;
        EXPECT_TRUE(std::regex_match(o.key, std::regex("[a-z][a-z0-9_]*"))) << o.key;
      }
      EXPECT_FALSE(o.help.empty()) << o.flags << o.key;
    }
  }
}

TEST(Commands, TheCommandLineHasEveryCommandAndEveryFlagOfItsTable) {
  const testing::CommandResult top = testing::RunBmpipe("--help");
  EXPECT_EQ(top.exit_code, 0);
  EXPECT_NE(top.out.find(std::string(ProgramHelp()).substr(0, 60)), std::string::npos);
  for (const Command& c : Commands()) {
    EXPECT_NE(top.out.find("  " + std::string(c.name) + " "), std::string::npos) << c.name;
    const testing::CommandResult help = testing::RunBmpipe(std::string(c.name) + " --help");
    EXPECT_EQ(help.exit_code, 0) << c.name;
    const std::unique_ptr<Invocation> invocation = c.make();
    for (const Option& o : invocation->options().options()) {
      for (const std::string& f : FlagNames(o)) {
        if (!f.empty()) {
          EXPECT_NE(help.out.find(f), std::string::npos) << c.name << " " << f;
        }
      }
    }
  }
  const testing::CommandResult version = testing::RunBmpipe("--version");
  EXPECT_EQ(version.out, "bmpipe " + std::string(Version()) + "\n");
}

TEST(Commands, NameListsInTheHelpComeFromTheTables) {
  const std::string plan = testing::RunBmpipe("plan --help").out;
  const std::string exp = testing::RunBmpipe("export --help").out;
  const std::string simulate = testing::RunBmpipe("simulate --help").out;
  const std::string search = testing::RunBmpipe("search --help").out;
  auto joined = [](const std::vector<std::string>& names) { return fmt::format("{}", fmt::join(names, ", ")); };
  EXPECT_NE(plan.find(joined(FormatNames())), std::string::npos);
  EXPECT_NE(search.find(joined(FormatNames())), std::string::npos);
  EXPECT_NE(exp.find(WordsOr(FormatNames())), std::string::npos);
  EXPECT_NE(simulate.find(WordsOr(PlanFormatNames())), std::string::npos);
  for (const Target& t : Targets()) {
    EXPECT_NE(plan.find(std::string(t.name) + ": " + std::string(t.framework).substr(0, 20)), std::string::npos) << t.name;
  }
  for (const Framework& f : Frameworks()) {
    EXPECT_NE(exp.find(std::string(f.format) + " (" + std::string(f.writes).substr(0, 20)), std::string::npos) << f.format;
  }
}

// No list of three or more format or target names is written by hand outside the tables
// (frameworks/framework.cc); help texts, errors and docstrings derive them.
TEST(Commands, NoNameListIsWrittenByHand) {
  namespace fs = std::filesystem;
  std::vector<std::string> names = FormatNames();
  for (const std::string& t : TargetNames()) names.push_back(t);
  std::string alternatives;
  for (const std::string& n : names) alternatives += (alternatives.empty() ? "" : "|") + n;
  // Three names in a row, separated by ", " (and " or " / " and " before the last).
  const std::regex list("\\b(" + alternatives + "),\\s+(" + alternatives + ")(,\\s+|\\s+or\\s+|\\s+and\\s+)(" +
                        alternatives + ")\\b");
  int files = 0;
  for (const char* top : {"src", "apps", "python/src", "python/bmpipe"}) {
    for (const fs::directory_entry& e : fs::recursive_directory_iterator(testing::SourcePath(top))) {
      const std::string path = e.path().string();
      if (!e.is_regular_file() || path.find("frameworks/framework.") != std::string::npos) continue;
      const std::string ext = e.path().extension().string();
      if (ext != ".cc" && ext != ".h" && ext != ".py" && ext != ".in") continue;
      ++files;
      const std::string text = testing::ReadFile(path);
      std::smatch m;
      EXPECT_FALSE(std::regex_search(text, m, list)) << path << ": " << m.str();
    }
  }
  EXPECT_GT(files, 100);
}

TEST(Commands, KeywordsReadAsTheCommandLineReadsFlags) {
  std::unique_ptr<Invocation> plan = FindCommand("plan")->make();
  const Json good = Json::parse(R"({"time_limit": 2.5, "solver": "cbc", "node_limit": 3, "target": "megatron",
                                   "recompute": "none,full", "tp": 2, "flash_attention": true, "zero": 1})");
  ASSERT_TRUE(ReadOptions(plan->options(), good, "plan").ok());
  EXPECT_EQ(*std::get<double*>(plan->options().Find("time_limit")->field), 2.5);
  EXPECT_EQ(*std::get<std::string*>(plan->options().Find("solver")->field), "cbc");
  EXPECT_EQ(*std::get<long*>(plan->options().Find("node_limit")->field), 3);
  EXPECT_EQ(*std::get<std::vector<std::string>*>(plan->options().Find("recompute")->field),
            (std::vector<std::string>{"none", "full"}));
  EXPECT_TRUE(*std::get<bool*>(plan->options().Find("flash_attention")->field));
  auto error = [&](const char* doc) {
    const Status s = ReadOptions(FindCommand("plan")->make()->options(), Json::parse(doc), "bmpipe.plan");
    return s.ok() ? std::string("ok") : s.error().message;
  };
  EXPECT_EQ(error(R"({"time_limt": 2})"),
            "bmpipe.plan: unknown keyword 'time_limt'; did you mean 'time_limit'?; keywords: " +
                [&] {
                  std::string keys;
                  for (const Option& o : plan->options().options()) {
                    if (!o.key.empty()) keys += (keys.empty() ? "" : ", ") + o.key;
                  }
                  return keys;
                }());
  EXPECT_EQ(error(R"({"time_limit": 0})"), "bmpipe.plan: time_limit 0: give a positive number");
  EXPECT_EQ(error(R"({"time_limit": "10"})"), "bmpipe.plan: time_limit \"10\": give a number");
  EXPECT_EQ(error(R"({"solver": "gurobi"})"), "bmpipe.plan: solver 'gurobi': use bnb, cbc or brute-force");
  EXPECT_EQ(error(R"({"node_limit": 1.5})"), "bmpipe.plan: node_limit 1.5: give a whole number");
  EXPECT_EQ(error(R"({"tp": 1e12})"), "bmpipe.plan: tp 1000000000000.0: give a whole number");
  EXPECT_EQ(error(R"({"tp": 99999999999})"), "bmpipe.plan: tp 99999999999: give a whole number from -2147483648 to 2147483647");
  EXPECT_EQ(error(R"({"zero": 4})"), "bmpipe.plan: zero 4: give a number from 0 to 3");
  EXPECT_EQ(error(R"({"flash_attention": 1})"), "bmpipe.plan: flash_attention 1: give true or false");
  EXPECT_EQ(error(R"({"recompute": [1]})"), "bmpipe.plan: recompute [1]: give a list of strings");
  EXPECT_EQ(error(R"({"out": "x"})").rfind("bmpipe.plan: unknown keyword 'out'", 0), 0u);  // the command line's only
  EXPECT_EQ(error(R"({"tp": null})"), "ok");
  EXPECT_EQ(error("[1]"), "bmpipe.plan: the options must be keywords");
}

}  // namespace
}  // namespace bmpipe::app

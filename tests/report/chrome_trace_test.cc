// The Chrome trace of a simulated plan: every op with the simulator's times, the recomputation
// inside its backward, a memory counter per rank that follows the simulator's, same bytes every
// time.
#include "bmpipe/report/chrome_trace.h"

#include <map>

#include <gtest/gtest.h>

#include "bmpipe/core/document.h"
#include "bmpipe/io/plan_json.h"
#include "bmpipe/problem/problem_reader.h"
#include "bmpipe/schedule/schedule.h"
#include "test_support.h"

namespace bmpipe {
namespace {

TimeNs Nanos(const Json& micros) { return static_cast<TimeNs>(std::llround(micros.get<double>() * 1000)); }

TEST(ChromeTrace, EveryOpAndTheMemoryOfEveryRank) {
  const Problem problem = LoadProblem(testing::SourcePath("examples/tiny/problem.json")).value();
  const Plan plan = LoadPlan(testing::SourcePath("examples/tiny/plan.json"), problem).value().plan;
  SimOptions options;
  options.record_memory = true;
  const SimResult sim = SimulatePlan(problem, plan, options).value();
  const std::string text = PlanChromeTrace(problem, plan, "tiny").value();
  EXPECT_EQ(PlanChromeTrace(problem, plan, "tiny").value(), text);  // deterministic
  const Json doc = Json::parse(text);
  EXPECT_EQ(doc["displayTimeUnit"], "ms");
  EXPECT_EQ(doc["otherData"]["ranks"], 4);
  const Schedule schedule(problem.pipeline);
  std::map<int, std::vector<Json>> ops, recompute, update, memory;
  for (const Json& e : doc["traceEvents"]) {
    const int rank = e["pid"].get<int>() - 1;
    if (e["ph"] == "X" && e["cat"] == "recompute") recompute[rank].push_back(e);
    else if (e["ph"] == "X" && e["cat"] == "update") update[rank].push_back(e);
    else if (e["ph"] == "X") ops[rank].push_back(e);
    else if (e["ph"] == "C") memory[rank].push_back(e);
  }
  for (RankIdx r = 0; r < 4; ++r) {
    const std::vector<Op>& order = schedule.ops_of(r);
    ASSERT_EQ(ops[r].size(), order.size());
    for (std::size_t k = 0; k < order.size(); ++k) {
      const Json& e = ops[r][k];
      EXPECT_EQ(e["args"]["stage"], order[k].stage);
      EXPECT_EQ(e["args"]["micro_batch"], order[k].micro_batch);
      EXPECT_EQ(Nanos(e["ts"]), sim.op_timing[r][k].start_ns);
      EXPECT_EQ(Nanos(e["dur"]), sim.op_timing[r][k].end_ns - sim.op_timing[r][k].start_ns);
    }
    // The once-per-iteration update after the rank's last op.
    ASSERT_EQ(update[r].size(), sim.ranks[r].update_ns > 0 ? 1u : 0u);
    if (!update[r].empty()) {
      EXPECT_EQ(Nanos(update[r][0]["ts"]), sim.ranks[r].compute_end_ns);
      EXPECT_EQ(Nanos(update[r][0]["dur"]), sim.ranks[r].update_ns);
    }
    ASSERT_EQ(memory[r].size(), sim.memory[r].size());
    for (std::size_t k = 0; k < memory[r].size(); ++k) {
      EXPECT_EQ(Nanos(memory[r][k]["ts"]), sim.memory[r][k].time_ns);
      EXPECT_NEAR(memory[r][k]["args"]["GB"].get<double>() * 1e9, static_cast<double>(sim.memory[r][k].bytes), 1.0);
    }
  }
  // Stages 0 (full) and 1 (selective) recompute at the start of each of their 8 backwards.
  EXPECT_EQ(recompute[0].size() + recompute[1].size(), 2u * 8);
  for (const auto& [rank, slices] : recompute) EXPECT_TRUE(rank == 0 || rank == 1) << rank;
}

// Overlapped pairs (Megatron's combined 1F1B): each pair's all-to-all beside the other op, on a
// thread of its own, at the simulator's times, with what it hides.
TEST(ChromeTrace, OverlappedPairsShowTheirAllToAll) {
  const std::string dir = "tests/golden/exports/qwen3-30b-a3b-pp4-vpp2-pairs-megatron/";
  const Problem problem = LoadProblem(testing::SourcePath(dir + "problem.json")).value();
  ASSERT_TRUE(problem.pipeline.overlap);
  const Plan plan = LoadPlan(testing::SourcePath(dir + "plan.json"), problem).value().plan;
  const SimResult sim = SimulatePlan(problem, plan).value();
  const Json doc = Json::parse(PlanChromeTrace(problem, plan, "pairs").value());
  std::map<int, std::vector<Json>> comm;
  for (const Json& e : doc["traceEvents"]) {
    if (e["ph"] == "X" && e["cat"] == "pair comm") comm[e["pid"].get<int>() - 1].push_back(e);
  }
  std::size_t spans = 0;
  for (RankIdx r = 0; r < problem.pipeline.ranks; ++r) {
    const std::vector<CommSpan>& want = sim.ranks[r].pair_comm;
    ASSERT_EQ(comm[r].size(), want.size()) << r;
    TimeNs hidden = 0;
    for (std::size_t k = 0; k < want.size(); ++k) {
      EXPECT_EQ(comm[r][k]["tid"], 2);
      EXPECT_EQ(Nanos(comm[r][k]["ts"]), want[k].start_ns);
      EXPECT_EQ(Nanos(comm[r][k]["dur"]), want[k].end_ns - want[k].start_ns);
      EXPECT_EQ(comm[r][k]["args"]["stage"], want[k].op.stage);
      hidden += Nanos(comm[r][k]["args"]["hidden_us"]);
    }
    EXPECT_EQ(hidden, sim.ranks[r].hidden_comm_ns);
    spans += want.size();
  }
  EXPECT_GT(spans, 0u);
}

TEST(ChromeTrace, ATooLargePipelineIsRefused) {
  Problem problem = LoadProblem(testing::SourcePath("examples/tiny/problem.json")).value();
  problem.pipeline.micro_batches = 1'000'000;
  problem.pipeline.ranks = 4;
  const Status size = CheckTraceSize(problem);
  ASSERT_FALSE(size.ok());
  EXPECT_EQ(size.error().kind, ErrorKind::kTooLarge);
  EXPECT_NE(size.error().message.find("fewer micro-batches"), std::string::npos);
}

}  // namespace
}  // namespace bmpipe

#include "bmpipe/solve/candidates.h"

#include <random>

#include <gtest/gtest.h>

#include "bmpipe/sim/simulator.h"
#include "test_support.h"

namespace bmpipe {
namespace {

TEST(Candidates, RunsGroupIdenticalLayers) {
  Problem p = testing::UniformProblem(ScheduleKind::kOneFOneB, 2, 1, 2, 6, 10, 20);
  p.layers[0].static_bytes = 5;
  p.layers[5].options[0].forward_ns = 11;
  const std::vector<LayerRun> runs = FindRuns(p);
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[0].begin, 0);
  EXPECT_EQ(runs[1].begin, 1);
  EXPECT_EQ(runs[1].end, 5);
  EXPECT_EQ(runs[2].size(), 1);
}

TEST(Candidates, OneFOneBMemoryRowIsMinOfPMinusRAndM) {
  const Schedule s = Schedule(Pipeline{ScheduleKind::kOneFOneB, 4, 1, 3});
  const auto rows = PeakMemoryRows(s);
  for (RankIdx r = 0; r < 4; ++r) {
    ASSERT_EQ(rows[r].size(), 1u);
    EXPECT_EQ(rows[r][0].in_flight[0], std::min(4 - r, 3));
  }
}

// The memory rows give exactly the simulator's peak, for every schedule and random plans.
TEST(Candidates, MemoryRowsGiveTheSimulatedPeak) {
  std::mt19937_64 rng(99);
  for (int c = 0; c < 200; ++c) {
    testing::RandomCase rc = testing::MakeRandomCase(rng);
    const Problem& problem = rc.problem;
    const Schedule schedule = Schedule(problem.pipeline);
    Candidates candidates;
    candidates.memory_rows = PeakMemoryRows(schedule);
    std::vector<Candidate> stage(problem.pipeline.stages());
    std::vector<const Candidate*> chosen;
    for (StageIdx s = 0; s < problem.pipeline.stages(); ++s) {
      stage[s].cost = ComputeStageCost(problem, rc.plan, s);
      for (LayerIdx l = rc.plan.begin(s); l < rc.plan.end(s); ++l) stage[s].static_bytes += problem.layers[l].static_bytes;
    }
    for (const Candidate& k : stage) chosen.push_back(&k);
    const SimResult sim = SimulatePlan(problem, rc.plan).value();
    for (RankIdx r = 0; r < problem.pipeline.ranks; ++r) {
      ASSERT_EQ(RankPeakMemory(problem, candidates, r, chosen), sim.ranks[r].peak_memory_bytes) << "case " << c;
    }
  }
}

TEST(Candidates, MixesArePrunedToTheParetoFront) {
  // One layer type, options: none (fast, big), full (slow, small) and a dominated one.
  Problem p = testing::UniformProblem(ScheduleKind::kOneFOneB, 1, 1, 1, 2, 10, 20, 0, 100);
  for (Layer& layer : p.layers) {
    layer.options.push_back(LayerOption{"full", 10, 20, 10, 10, 0});
    layer.options.push_back(LayerOption{"worse", 10, 20, 15, 100, 0});
  }
  const Candidates c = GenerateCandidates(p, Schedule(p.pipeline));
  ASSERT_EQ(c.per_stage.size(), 1u);
  // Two layers, memory unconstrained, one chunk: only time matters, so only "none x2" remains.
  ASSERT_EQ(c.per_stage[0].size(), 1u);
  EXPECT_EQ(c.per_stage[0][0].cost.backward_ns, 40);
  // With memory for at most 110 saved bytes the fast mix is ruled out.
  p.memory_bytes = 110;
  const Candidates tight = GenerateCandidates(p, Schedule(p.pipeline));
  ASSERT_EQ(tight.per_stage[0].size(), 1u);
  EXPECT_EQ(tight.per_stage[0][0].cost.saved_bytes, 110);
  EXPECT_EQ(tight.per_stage[0][0].cost.recompute_ns, 10);
}

}  // namespace
}  // namespace bmpipe

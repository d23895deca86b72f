// Seeded random problems and plans: the simulator's answer is checked against the definition
// of docs/semantics.md op by op.
#include <algorithm>
#include <random>

#include <gtest/gtest.h>

#include "bmpipe/io/plan_json.h"
#include "bmpipe/sim/simulator.h"
#include "test_support.h"

namespace bmpipe {
namespace {

constexpr int kCases = 400;

struct OpRef {
  RankIdx rank;
  std::size_t position;
};

// Memory of rank r at instant t recomputed from the definition: static + reserved, saved bytes
// of every (stage, micro-batch) whose forward has ended and whose backward has not, and the
// transient of the op running at t.
Bytes MemoryAt(const Schedule& schedule, const std::vector<StageCost>& stages, const SimResult& sim,
               const RankResult& rank, RankIdx r, TimeNs t) {
  Bytes bytes = rank.static_bytes;
  const auto& ops = schedule.rank_ops()[r];
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const OpTiming& timing = sim.op_timing[r][i];
    if (timing.start_ns <= t && t < timing.end_ns) bytes += stages[ops[i].stage].transient_bytes;
    if (ops[i].kind != OpKind::kForward || timing.end_ns > t) continue;
    // Find the matching backward on this rank.
    for (std::size_t k = 0; k < ops.size(); ++k) {
      if (ops[k].kind == OpKind::kBackward && ops[k].stage == ops[i].stage &&
          ops[k].micro_batch == ops[i].micro_batch && sim.op_timing[r][k].end_ns > t) {
        bytes += stages[ops[i].stage].saved_bytes;
      }
    }
  }
  return bytes;
}

TEST(SimulatorProperty, RandomPlansObeyTheReferenceSemantics) {
  std::mt19937_64 rng(20261129);
  for (int c = 0; c < kCases; ++c) {
    testing::RandomCase rc = testing::MakeRandomCase(rng);
    const Problem& problem = rc.problem;
    const Pipeline& p = problem.pipeline;
    SCOPED_TRACE(::testing::Message() << "case " << c << ": " << ScheduleName(p.schedule) << " p=" << p.ranks
                                      << " v=" << p.chunks << " m=" << p.micro_batches);
    Result<SimResult> result = SimulatePlan(problem, rc.plan, SimOptions{true});
    ASSERT_TRUE(result.ok()) << result.error().message;
    const SimResult& sim = result.value();
    const Schedule schedule = Schedule(p);
    const std::vector<StageCost> stages = ComputeStageCosts(problem, rc.plan);

    // Where every (kind, stage, micro-batch) ran; each exactly once, on its stage's rank.
    std::vector<std::vector<int>> seen(2, std::vector<int>(static_cast<std::size_t>(p.stages()) * p.micro_batches, 0));
    std::vector<std::vector<OpTiming>> timing(2, std::vector<OpTiming>(seen[0].size()));
    for (RankIdx r = 0; r < p.ranks; ++r) {
      for (std::size_t i = 0; i < schedule.rank_ops()[r].size(); ++i) {
        const Op& op = schedule.rank_ops()[r][i];
        ASSERT_EQ(p.RankOf(op.stage), r);
        const std::size_t key = static_cast<std::size_t>(op.stage) * p.micro_batches + op.micro_batch;
        ++seen[static_cast<int>(op.kind)][key];
        timing[static_cast<int>(op.kind)][key] = sim.op_timing[r][i];
      }
    }
    for (const auto& kind : seen) {
      for (int count : kind) ASSERT_EQ(count, 1);
    }

    TimeNs iteration = 0;
    for (RankIdx r = 0; r < p.ranks; ++r) {
      TimeNs previous_end = 0;
      Bytes peak_by_definition = sim.ranks[r].static_bytes;
      for (std::size_t i = 0; i < schedule.rank_ops()[r].size(); ++i) {
        const Op& op = schedule.rank_ops()[r][i];
        const OpTiming& t = sim.op_timing[r][i];
        const StageCost& cost = stages[op.stage];
        // Durations, no overlap on a rank, and every op starts exactly when it can.
        ASSERT_EQ(t.end_ns - t.start_ns, op.kind == OpKind::kForward ? cost.forward_ns : cost.backward_ns);
        ASSERT_GE(t.start_ns, previous_end);
        TimeNs ready = 0;
        const std::size_t j = op.micro_batch;
        if (op.kind == OpKind::kForward && op.stage > 0) {
          const OpTiming& dep = timing[0][(op.stage - 1) * p.micro_batches + j];
          ready = dep.end_ns + (p.RankOf(op.stage - 1) != r ? stages[op.stage - 1].p2p_out_ns : 0);
        } else if (op.kind == OpKind::kBackward && op.stage == p.stages() - 1) {
          ready = timing[0][op.stage * p.micro_batches + j].end_ns;
        } else if (op.kind == OpKind::kBackward) {
          const OpTiming& dep = timing[1][(op.stage + 1) * p.micro_batches + j];
          ready = dep.end_ns + (p.RankOf(op.stage + 1) != r ? stages[op.stage].p2p_out_ns : 0);
        }
        ASSERT_GE(t.start_ns, ready);
        ASSERT_EQ(t.start_ns, std::max(previous_end, ready));
        previous_end = t.end_ns;
        peak_by_definition = std::max({peak_by_definition, MemoryAt(schedule, stages, sim, sim.ranks[r], r, t.start_ns),
                                       MemoryAt(schedule, stages, sim, sim.ranks[r], r, t.end_ns)});
      }
      // Memory never exceeds the reported peak, and the peak is reached.
      for (const MemoryPoint& point : sim.memory[r]) ASSERT_LE(point.bytes, sim.ranks[r].peak_memory_bytes);
      ASSERT_EQ(peak_by_definition, sim.ranks[r].peak_memory_bytes);
      ASSERT_EQ(sim.ranks[r].finish_ns, previous_end + sim.ranks[r].update_ns);
      iteration = std::max(iteration, sim.ranks[r].finish_ns);
    }
    ASSERT_EQ(sim.iteration_ns, iteration);
    // The critical path is a real path whose length is the iteration time.
    Durations<TimeNs> durations;
    for (const StageCost& stage : stages) {
      durations.forward.push_back(stage.forward_ns);
      durations.backward.push_back(stage.backward_ns);
      durations.p2p_out.push_back(stage.p2p_out_ns);
    }
    for (const RankResult& r : sim.ranks) durations.rank_update.push_back(r.update_ns);
    ASSERT_EQ(PathLength(sim.critical_path, durations), sim.iteration_ns);
    ASSERT_NEAR(sim.bubble.ideal + sim.bubble.imbalance + sim.bubble.recompute, sim.bubble.real, 1e-9);
  }
}

TEST(SimulatorProperty, RerunningGivesIdenticalOutput) {
  std::mt19937_64 rng(7);
  for (int c = 0; c < 50; ++c) {
    testing::RandomCase rc = testing::MakeRandomCase(rng);
    SimResult a = SimulatePlan(rc.problem, rc.plan, SimOptions{true}).value();
    SimResult b = SimulatePlan(rc.problem, rc.plan, SimOptions{true}).value();
    SolverInfo solver{"test", SolveStatus::kFeasible, 0};
    ASSERT_EQ(PlanJsonText(rc.problem, rc.plan, a, solver), PlanJsonText(rc.problem, rc.plan, b, solver));
    for (RankIdx r = 0; r < rc.problem.pipeline.ranks; ++r) {
      ASSERT_EQ(a.op_timing[r].size(), b.op_timing[r].size());
      for (std::size_t i = 0; i < a.op_timing[r].size(); ++i) {
        ASSERT_EQ(a.op_timing[r][i].start_ns, b.op_timing[r][i].start_ns);
      }
      ASSERT_EQ(a.memory[r].size(), b.memory[r].size());
    }
  }
}

}  // namespace
}  // namespace bmpipe

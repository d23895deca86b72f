// Seeded random problems and plans: the simulator's answer is checked against the definition
// of docs/semantics.md op by op.
#include <algorithm>
#include <iterator>
#include <map>
#include <random>
#include <set>
#include <tuple>

#include <gtest/gtest.h>

#include "bmpipe/io/plan_json.h"
#include "bmpipe/sim/simulator.h"
#include "test_support.h"

namespace bmpipe {
namespace {

constexpr int kCases = 400;

// The reference semantics written out again, independently of schedule/ and sim/: where a stage
// runs, what an op waits for, how long it runs and what it does to memory.
// Loop placement: stage s on rank s mod p; V (zb-v, dualpipev): stages 0..p-1 on ranks 0..p-1,
// stages p..2p-1 back on ranks p-1..0; mirror (dualpipe): the first half of the micro-batches runs
// stage s on rank s, the second half on rank p-1-s.
RankIdx RankOfOp(const Pipeline& p, const Op& op) {
  if (p.schedule == ScheduleKind::kDualPipe) return 2 * op.micro_batch < p.micro_batches ? op.stage : p.ranks - 1 - op.stage;
  const bool v = p.schedule == ScheduleKind::kZeroBubbleV || p.schedule == ScheduleKind::kDualPipeV;
  if (v && op.stage >= p.ranks) return 2 * p.ranks - 1 - op.stage;
  return op.stage % p.ranks;
}

std::vector<Op> WaitsFor(const Pipeline& p, const Op& op) {
  const bool last = op.stage == p.stages() - 1;
  switch (op.kind) {
    case OpKind::kForward:
      if (op.stage == 0) return {};
      return {{op.stage - 1, op.micro_batch, OpKind::kForward}};
    case OpKind::kBackward:
      if (last) return {{op.stage, op.micro_batch, OpKind::kForward}};
      return {{op.stage + 1, op.micro_batch, OpKind::kBackward}};
    case OpKind::kWeightGrad:
      return {{op.stage, op.micro_batch, OpKind::kBackward}};
  }
  return {};
}

TimeNs DurationOf(const Pipeline& p, const StageCost& c, OpKind kind) {
  const bool split = TraitsOf(p.schedule).split_backward;
  if (kind == OpKind::kForward) return c.forward_ns;
  if (kind == OpKind::kWeightGrad) return c.weight_grad_ns;
  return split ? c.backward_ns - c.weight_grad_ns : c.backward_ns;
}

struct Event {
  TimeNs start = -1, end = -1;
};

// Times the ops the plain way: sweep the ranks again and again, timing each rank's next action
// (its next op and the ops joined to it) once everything its ops wait for outside it has ended,
// until no rank can move. An action's ops run back to back; each counts as ended when the action
// ends.
std::vector<std::vector<Event>> SimulateByHand(const Pipeline& p, const std::vector<std::vector<Op>>& orders,
                                               const std::vector<StageCost>& stages) {
  auto key = [&](const Op& op) { return std::make_tuple(static_cast<int>(op.kind), op.stage, op.micro_batch); };
  std::map<std::tuple<int, int, int>, TimeNs> ended;
  std::vector<std::vector<Event>> events(orders.size());
  std::vector<std::size_t> next(orders.size(), 0);
  for (bool moved = true; moved;) {
    moved = false;
    for (RankIdx r = 0; r < p.ranks; ++r) {
      while (next[r] < orders[r].size()) {
        std::size_t last = next[r];
        while (last + 1 < orders[r].size() && orders[r][last + 1].joined) ++last;
        auto inside = [&](const Op& dep) {
          for (std::size_t k = next[r]; k <= last; ++k) {
            if (key(orders[r][k]) == key(dep)) return true;
          }
          return false;
        };
        TimeNs ready = next[r] == 0 ? 0 : events[r].back().end;
        bool waiting = false;
        for (std::size_t k = next[r]; k <= last && !waiting; ++k) {
          const Op& op = orders[r][k];
          for (const Op& dep : WaitsFor(p, op)) {
            if (inside(dep)) continue;
            auto it = ended.find(key(dep));
            if (it == ended.end()) {
              waiting = true;
              break;
            }
            const bool crosses = RankOfOp(p, dep) != r;
            ready = std::max(ready, it->second + (crosses ? stages[std::min(dep.stage, op.stage)].p2p_out_ns : 0));
          }
        }
        if (waiting) break;
        TimeNs at = ready;
        std::vector<TimeNs> length;
        for (std::size_t k = next[r]; k <= last; ++k) length.push_back(DurationOf(p, stages[orders[r][k].stage], orders[r][k].kind));
        // An overlapped pair: a forward, then a backward of another micro-batch (and maybe that
        // backward's W). First the forward's compute beside the backward's communication, then the
        // backward's compute (and its W) beside the forward's communication, each the longer.
        const Op& f = orders[r][next[r]];
        if (p.overlap && last > next[r] && f.kind == OpKind::kForward && orders[r][next[r] + 1].kind == OpKind::kBackward &&
            orders[r][next[r] + 1].micro_batch != f.micro_batch) {
          const StageCost& a = stages[f.stage];
          const StageCost& b = stages[orders[r][next[r] + 1].stage];
          const bool with_w = last >= next[r] + 2;
          const TimeNs w = with_w ? length[2] : 0;
          length[0] = std::max(a.forward_ns - a.forward_comm_ns, b.backward_comm_ns);
          length[1] = std::max(length[1] - b.backward_comm_ns + w, a.forward_comm_ns) - w;
        }
        for (std::size_t k = next[r]; k <= last; ++k) {
          const TimeNs end = at + length[k - next[r]];
          events[r].push_back({at, end});
          at = end;
        }
        for (std::size_t k = next[r]; k <= last; ++k) ended[key(orders[r][k])] = at;
        next[r] = last + 1;
        moved = true;
      }
    }
  }
  return events;
}

// Memory of a rank from the definition, once its first `done` ops have run (a rank runs one op
// at a time): static + reserved; the saved bytes of every (stage, micro-batch) whose forward is
// among them and whose backward is not; with a split backward the held bytes of those whose B is
// among them and whose W is not; plus the transient of op `running` if one is given.
Bytes MemoryAfter(const Pipeline& p, const std::vector<Op>& ops, const std::vector<StageCost>& stages,
                  Bytes static_bytes, std::size_t done, const Op* running) {
  auto ran = [&](StageIdx s, MicroBatchIdx j, OpKind kind) {
    for (std::size_t k = 0; k < done; ++k) {
      if (ops[k].stage == s && ops[k].micro_batch == j && ops[k].kind == kind) return true;
    }
    return false;
  };
  Bytes bytes = static_bytes + (running ? stages[running->stage].transient_bytes : 0);
  for (std::size_t k = 0; k < done; ++k) {
    if (ops[k].kind != OpKind::kForward) continue;
    const StageIdx s = ops[k].stage;
    const MicroBatchIdx j = ops[k].micro_batch;
    if (!ran(s, j, OpKind::kBackward)) bytes += stages[s].saved_bytes;
    if (TraitsOf(p.schedule).split_backward && ran(s, j, OpKind::kBackward) && !ran(s, j, OpKind::kWeightGrad)) {
      bytes += stages[s].weight_grad_bytes;
    }
  }
  return bytes;
}

// Every schedule, on seeded random problems and plans: each op exactly once on its stage's rank,
// the same start and end as the plain event simulation, the same memory peak as the definition
// gives at every op boundary, and a critical path as long as the iteration.
TEST(SimulatorProperty, RandomPlansMatchAnEventSimulationByHand) {
  std::mt19937_64 rng(20261129), comm_rng(1202);
  std::set<ScheduleKind> covered;
  int overlapped = 0;
  for (int c = 0; c < kCases; ++c) {
    testing::RandomCase rc = testing::MakeRandomCase(rng);
    // Half the cases of the schedules with pairs overlap them, each option partly communication.
    const ScheduleKind kind = rc.problem.pipeline.schedule;
    auto draw = [&](std::int64_t lo, std::int64_t hi) { return std::uniform_int_distribution<std::int64_t>(lo, hi)(comm_rng); };
    if ((kind == ScheduleKind::kDualPipe || kind == ScheduleKind::kDualPipeV || kind == ScheduleKind::kInterleavedOneFOneB) &&
        draw(0, 1) == 0) {
      rc.problem.pipeline.overlap = true;
      ++overlapped;
      for (Layer& layer : rc.problem.layers) {
        for (LayerOption& o : layer.options) {
          o.forward_comm_ns = draw(0, o.forward_ns);
          o.backward_comm_ns = draw(0, std::max<TimeNs>(0, o.backward_ns + o.recompute_ns - layer.weight_grad_ns));
        }
      }
    }
    const Problem& problem = rc.problem;
    const Pipeline& p = problem.pipeline;
    covered.insert(p.schedule);
    SCOPED_TRACE(::testing::Message() << "case " << c << ": " << ScheduleName(p.schedule) << " p=" << p.ranks
                                      << " v=" << p.chunks << " m=" << p.micro_batches << " N="
                                      << p.MicroBatchGroup());
    Result<SimResult> result = SimulatePlan(problem, rc.plan, SimOptions{true});
    ASSERT_TRUE(result.ok()) << result.error().message;
    const SimResult& sim = result.value();
    const Schedule schedule = Schedule(p);
    const std::vector<StageCost> stages = ComputeStageCosts(problem, rc.plan);

    // Every (kind, stage, micro-batch) the schedule has runs once, on its stage's rank.
    const int kinds = TraitsOf(p.schedule).split_backward ? 3 : 2;
    std::set<std::tuple<int, int, int>> seen;
    for (RankIdx r = 0; r < p.ranks; ++r) {
      for (const Op& op : schedule.rank_ops()[r]) {
        ASSERT_EQ(RankOfOp(p, op), r);
        ASSERT_LT(static_cast<int>(op.kind), kinds);
        ASSERT_TRUE(seen.insert({static_cast<int>(op.kind), op.stage, op.micro_batch}).second);
      }
    }
    ASSERT_EQ(seen.size(), static_cast<std::size_t>(kinds) * p.stages() * p.micro_batches);

    const std::vector<std::vector<Event>> events = SimulateByHand(p, schedule.rank_ops(), stages);
    TimeNs iteration = 0;
    for (RankIdx r = 0; r < p.ranks; ++r) {
      const std::vector<Op>& ops = schedule.rank_ops()[r];
      ASSERT_EQ(events[r].size(), ops.size()) << "the plain simulation deadlocked on rank " << r;
      // Static memory: the reserved bytes and the layers of every stage the rank runs an op of (each
      // copy of a stage is a full one).
      std::set<StageIdx> held;
      for (const Op& op : ops) held.insert(op.stage);
      Bytes static_bytes = problem.reserved_bytes;
      for (StageIdx s : held) {
        for (LayerIdx l = rc.plan.begin(s); l < rc.plan.end(s); ++l) static_bytes += problem.layers[l].static_bytes;
      }
      ASSERT_EQ(sim.ranks[r].static_bytes, static_bytes);
      Bytes peak = static_bytes;
      for (std::size_t i = 0; i < ops.size(); ++i) {
        ASSERT_EQ(sim.op_timing[r][i].start_ns, events[r][i].start) << "rank " << r << " op " << i;
        ASSERT_EQ(sim.op_timing[r][i].end_ns, events[r][i].end) << "rank " << r << " op " << i;
        peak = std::max({peak, MemoryAfter(p, ops, stages, static_bytes, i, &ops[i]),
                         MemoryAfter(p, ops, stages, static_bytes, i + 1, nullptr)});
      }
      // Memory never exceeds the reported peak, and the peak is the definition's.
      for (const MemoryPoint& point : sim.memory[r]) ASSERT_LE(point.bytes, sim.ranks[r].peak_memory_bytes);
      ASSERT_EQ(peak, sim.ranks[r].peak_memory_bytes);
      const TimeNs last = ops.empty() ? 0 : events[r].back().end;
      ASSERT_EQ(sim.ranks[r].finish_ns, last + sim.ranks[r].update_ns);
      iteration = std::max(iteration, sim.ranks[r].finish_ns);
    }
    ASSERT_EQ(sim.iteration_ns, iteration);
    // The critical path is a real path whose length is the iteration time.
    Durations<TimeNs> durations;
    for (const StageCost& stage : stages) {
      durations.forward.push_back(stage.forward_ns);
      durations.backward.push_back(stage.backward_ns);
      durations.weight_grad.push_back(stage.weight_grad_ns);
      durations.p2p_out.push_back(stage.p2p_out_ns);
      durations.forward_comm.push_back(stage.forward_comm_ns);
      durations.backward_comm.push_back(stage.backward_comm_ns);
    }
    for (const RankResult& r : sim.ranks) durations.rank_update.push_back(r.update_ns);
    ASSERT_EQ(PathLength(sim.critical_path, durations), sim.iteration_ns);
    ASSERT_NEAR(sim.bubble.ideal + sim.bubble.imbalance + sim.bubble.recompute, sim.bubble.real, 1e-9);
  }
  EXPECT_EQ(covered.size(), std::size(kSchedules)) << "every schedule is drawn";
  EXPECT_GT(overlapped, 30);
}

TEST(SimulatorProperty, RerunningGivesIdenticalOutput) {
  std::mt19937_64 rng(7);
  for (int c = 0; c < 50; ++c) {
    testing::RandomCase rc = testing::MakeRandomCase(rng);
    SimResult a = SimulatePlan(rc.problem, rc.plan, SimOptions{true}).value();
    SimResult b = SimulatePlan(rc.problem, rc.plan, SimOptions{true}).value();
    SolverInfo solver{"test", ModelStatus::kFeasible, 0};
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

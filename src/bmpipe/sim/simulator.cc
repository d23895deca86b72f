#include "bmpipe/sim/simulator.h"

#include <algorithm>
#include <string>

namespace bmpipe {
namespace {

constexpr TimeNs kNotYet = -1;

// Index of an op in the end-time table: forwards first, then backwards, stage-major.
struct OpIndex {
  int stages;
  int micro_batches;
  std::int64_t operator()(OpKind kind, StageIdx s, MicroBatchIdx j) const {
    const std::int64_t base = kind == OpKind::kForward ? 0 : std::int64_t{stages} * micro_batches;
    return base + std::int64_t{s} * micro_batches + j;
  }
};

// Fills result.op_timing: the longest-path start of every op. Each rank runs its ops in order
// until one waits for an op not yet timed; that rank resumes when the op it waits for is timed.
Status TimeOps(const Schedule& schedule, const std::vector<StageCost>& stages, SimResult& result) {
  const Pipeline& p = schedule.pipeline;
  const int num_stages = p.stages();
  const OpIndex index{num_stages, p.micro_batches};
  std::vector<TimeNs> end(2 * static_cast<std::size_t>(num_stages) * p.micro_batches, kNotYet);
  std::vector<std::size_t> next(p.ranks, 0);
  std::vector<TimeNs> clock(p.ranks, 0);
  std::vector<std::int64_t> waiting_for(p.ranks, -1);
  std::vector<RankIdx> runnable;
  for (RankIdx r = p.ranks - 1; r >= 0; --r) runnable.push_back(r);

  result.op_timing.assign(p.ranks, {});
  for (RankIdx r = 0; r < p.ranks; ++r) result.op_timing[r].resize(schedule.rank_ops[r].size());

  while (!runnable.empty()) {
    const RankIdx r = runnable.back();
    runnable.pop_back();
    const std::vector<Op>& ops = schedule.rank_ops[r];
    while (next[r] < ops.size()) {
      const Op& op = ops[next[r]];
      const StageIdx s = op.stage;
      // The op this one waits for, and the p2p delay when that op ran on another rank.
      std::int64_t dependency = -1;
      TimeNs delay = 0;
      if (op.kind == OpKind::kForward) {
        if (s > 0) {
          dependency = index(OpKind::kForward, s - 1, op.micro_batch);
          if (p.RankOf(s - 1) != r) delay = stages[s - 1].p2p_out_ns;
        }
      } else if (s == num_stages - 1) {
        dependency = index(OpKind::kForward, s, op.micro_batch);
      } else {
        dependency = index(OpKind::kBackward, s + 1, op.micro_batch);
        if (p.RankOf(s + 1) != r) delay = stages[s].p2p_out_ns;
      }
      TimeNs ready = 0;
      if (dependency >= 0) {
        if (end[dependency] == kNotYet) {
          waiting_for[r] = dependency;
          break;
        }
        ready = end[dependency] + delay;
      }
      const TimeNs duration = op.kind == OpKind::kForward ? stages[s].forward_ns : stages[s].backward_ns;
      const TimeNs start = std::max(clock[r], ready);
      const std::int64_t self = index(op.kind, s, op.micro_batch);
      result.op_timing[r][next[r]] = {start, start + duration};
      end[self] = start + duration;
      clock[r] = start + duration;
      ++next[r];
      // Wake the rank whose next op waits for this one (each op has at most one dependent).
      RankIdx dependent = -1;
      if (op.kind == OpKind::kForward) {
        dependent = s + 1 < num_stages ? p.RankOf(s + 1) : p.RankOf(s);
      } else if (s > 0) {
        dependent = p.RankOf(s - 1);
      }
      if (dependent >= 0 && dependent != r && waiting_for[dependent] == self) {
        waiting_for[dependent] = -1;
        runnable.push_back(dependent);
      }
    }
  }
  for (RankIdx r = 0; r < p.ranks; ++r) {
    if (next[r] < schedule.rank_ops[r].size()) {
      const Op& op = schedule.rank_ops[r][next[r]];
      return InternalError("the schedule deadlocks: rank " + std::to_string(r) + " op " + std::to_string(next[r]) +
                           " (" + (op.kind == OpKind::kForward ? "F" : "B") + " stage " + std::to_string(op.stage) +
                           " micro-batch " + std::to_string(op.micro_batch) + ") waits for an op that never runs");
    }
  }
  return {};
}

// Per-rank busy time, memory over time and its peak.
void AccountRanks(const Schedule& schedule, const std::vector<StageCost>& stages, const std::vector<RankCost>& ranks,
                  const SimOptions& options, SimResult& result) {
  const Pipeline& p = schedule.pipeline;
  result.ranks.assign(p.ranks, {});
  if (options.record_memory) result.memory.assign(p.ranks, {});
  for (RankIdx r = 0; r < p.ranks; ++r) {
    RankResult& rr = result.ranks[r];
    rr.static_bytes = ranks[r].static_bytes;
    rr.update_ns = ranks[r].update_ns;
    rr.peak_memory_bytes = rr.static_bytes;
    Bytes saved = 0;
    int in_flight = 0;
    std::vector<MemoryPoint>* trace = options.record_memory ? &result.memory[r] : nullptr;
    if (trace) trace->push_back({0, rr.static_bytes});
    const std::vector<Op>& ops = schedule.rank_ops[r];
    for (std::size_t i = 0; i < ops.size(); ++i) {
      const StageCost& c = stages[ops[i].stage];
      const OpTiming& t = result.op_timing[r][i];
      rr.busy_ns += t.end_ns - t.start_ns;
      // While the op runs: everything saved so far plus its transient.
      const Bytes running = rr.static_bytes + saved + c.transient_bytes;
      if (running > rr.peak_memory_bytes) {
        rr.peak_memory_bytes = running;
        rr.peak_time_ns = t.start_ns;
      }
      if (ops[i].kind == OpKind::kForward) {
        saved += c.saved_bytes;
        ++in_flight;
      } else {
        rr.recompute_ns += c.recompute_ns;
        saved -= c.saved_bytes;
        --in_flight;
      }
      rr.max_in_flight = std::max(rr.max_in_flight, in_flight);
      const Bytes after = rr.static_bytes + saved;
      if (after > rr.peak_memory_bytes) {
        rr.peak_memory_bytes = after;
        rr.peak_time_ns = t.end_ns;
      }
      if (trace) {
        trace->push_back({t.start_ns, running});
        trace->push_back({t.end_ns, after});
      }
    }
    rr.compute_end_ns = ops.empty() ? 0 : result.op_timing[r].back().end_ns;
    rr.finish_ns = rr.compute_end_ns + rr.update_ns;
    result.iteration_ns = std::max(result.iteration_ns, rr.finish_ns);
    if (rr.peak_memory_bytes > result.capacity_bytes) result.fits = false;
  }
}

Bubble ComputeBubble(const Pipeline& p, const SimResult& result) {
  Bubble b;
  if (result.iteration_ns <= 0) return b;
  TimeNs busiest = 0;
  TimeNs useful = 0;
  TimeNs recompute = 0;
  for (const RankResult& r : result.ranks) {
    busiest = std::max(busiest, r.busy_ns);
    useful += r.busy_ns - r.recompute_ns;
    recompute += r.recompute_ns;
  }
  const double iteration = static_cast<double>(result.iteration_ns);
  b.ratio = 1.0 - static_cast<double>(busiest) / iteration;
  if (useful <= 0) return b;
  const double w = static_cast<double>(useful);
  b.real = (static_cast<double>(p.ranks) * iteration - w) / w;
  b.ideal = static_cast<double>(p.ranks - 1) / (static_cast<double>(p.chunks) * p.micro_batches);
  b.recompute = static_cast<double>(recompute) / w;
  b.imbalance = b.real - b.ideal - b.recompute;
  return b;
}

}  // namespace

Result<SimResult> Simulate(const Schedule& schedule, const std::vector<StageCost>& stages,
                           const std::vector<RankCost>& ranks, Bytes capacity_bytes, const SimOptions& options) {
  const Pipeline& p = schedule.pipeline;
  if (static_cast<int>(stages.size()) != p.stages() || static_cast<int>(ranks.size()) != p.ranks ||
      static_cast<int>(schedule.rank_ops.size()) != p.ranks) {
    return InternalError("Simulate: stage or rank costs do not match the schedule's pipeline");
  }
  SimResult result;
  result.capacity_bytes = capacity_bytes;
  Status timed = TimeOps(schedule, stages, result);
  if (!timed.ok()) return timed.error();
  AccountRanks(schedule, stages, ranks, options, result);
  result.bubble = ComputeBubble(p, result);
  return result;
}

Result<SimResult> SimulatePlan(const Problem& problem, const Plan& plan, const SimOptions& options) {
  Status valid = ValidatePlan(problem, plan);
  if (!valid.ok()) return valid.error();
  return Simulate(BuildSchedule(problem.pipeline), ComputeStageCosts(problem, plan), ComputeRankCosts(problem, plan),
                  problem.memory_bytes, options);
}

}  // namespace bmpipe

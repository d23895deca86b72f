#include "bmpipe/sim/simulator.h"

#include <algorithm>
#include <cassert>
#include <string>
#include <utility>

#include "bmpipe/sim/timing.h"

namespace bmpipe {
namespace {

// The simulator's durations for a plan's stage and rank costs.
Durations<TimeNs> DurationsOf(const std::vector<StageCost>& stages, const std::vector<RankCost>& ranks) {
  Durations<TimeNs> d;
  for (const StageCost& c : stages) {
    d.forward.push_back(c.forward_ns);
    d.backward.push_back(c.backward_ns);
    d.weight_grad.push_back(c.weight_grad_ns);
    d.p2p_out.push_back(c.p2p_out_ns);
    d.forward_comm.push_back(c.forward_comm_ns);
    d.backward_comm.push_back(c.backward_comm_ns);
  }
  for (const RankCost& r : ranks) d.rank_update.push_back(r.update_ns);
  return d;
}

Status TimeOps(const Schedule& schedule, const Durations<TimeNs>& durations, SimResult& result) {
  Timing<TimeNs> timing = TimeSchedule(schedule, durations, /*record_binding=*/true);
  if (!timing.complete) {
    const Op& op = schedule.ops_of(timing.stuck_rank)[timing.stuck_position];
    return InternalError("the schedule deadlocks: rank " + std::to_string(timing.stuck_rank) + " op " +
                         std::to_string(timing.stuck_position) + " (" + "FBW"[static_cast<int>(op.kind)] +
                         " stage " + std::to_string(op.stage) + " micro-batch " + std::to_string(op.micro_batch) +
                         ") waits for an op that never runs");
  }
  result.critical_path = CriticalPath(schedule, durations, timing, timing.last_rank);
  result.op_timing = std::move(timing.span);
  return {};
}

// The communication the overlapped pairs of rank r run beside their partners: in the first
// phase the backward's (Mb, under the forward's compute F - Mf), in the second the forward's (Mf,
// under the backward's compute and its joined W). What a pair hides, min(F - Mf, Mb) + min(B' - Mb
// + W', Mf), is its ops one after the other less the pair.
void PairComm(const Schedule& schedule, const Durations<TimeNs>& durations, const std::vector<OpTiming>& timing,
              RankIdx r, RankResult& rr) {
  const Pipeline& p = schedule.pipeline();
  const std::vector<Op>& ops = schedule.ops_of(r);
  for (std::size_t i = 0; i < ops.size();) {
    const std::size_t last = ActionAround(ops, i).second;
    const ActionTimes<TimeNs> overlapped = TimeAction(durations, ops, i, last, p.SplitBackward(), true);
    if (overlapped.pair) {
      const ActionTimes<TimeNs> serial = TimeAction(durations, ops, i, last, p.SplitBackward(), false);
      const Op& f = ops[i];
      const Op& b = ops[i + 1];
      const TimeNs mf = durations.forward_comm[f.stage], mb = durations.backward_comm[b.stage];
      const TimeNs w = overlapped.weight_joined ? serial.op[2] : 0;
      const CommSpan first{timing[i].start_ns, timing[i].start_ns + mb, b, std::min(serial.op[0] - mf, mb)};
      const CommSpan second{timing[i + 1].start_ns, timing[i + 1].start_ns + mf, f,
                            std::min(serial.op[1] - mb + w, mf)};
      for (const CommSpan& span : {first, second}) {
        rr.hidden_comm_ns += span.hidden_ns;
        if (span.end_ns > span.start_ns) rr.pair_comm.push_back(span);
      }
      assert(first.hidden_ns + second.hidden_ns ==
                 serial.op[0] + serial.op[1] + serial.op[2] - overlapped.op[0] - overlapped.op[1] - overlapped.op[2] &&
             "a pair hides its ops one after the other less the pair");
    }
    i = last + 1;
  }
}

// Per-rank busy time, memory over time and its peak.
void AccountRanks(const Schedule& schedule, const std::vector<StageCost>& stages, const std::vector<RankCost>& ranks,
                  const Durations<TimeNs>& durations, const SimOptions& options, SimResult& result) {
  const Pipeline& p = schedule.pipeline();
  result.ranks.assign(p.ranks, {});
  if (options.record_memory) result.memory.assign(p.ranks, {});
  for (RankIdx r = 0; r < p.ranks; ++r) {
    RankResult& rr = result.ranks[r];
    rr.static_bytes = ranks[r].static_bytes;
    rr.update_ns = ranks[r].update_ns;
    if (p.overlap) PairComm(schedule, durations, result.op_timing[r], r, rr);
    rr.peak_memory_bytes = rr.static_bytes;
    Bytes saved = 0;  // saved and held bytes of the micro-batches in flight
    int in_flight = 0;
    std::vector<MemoryPoint>* trace = options.record_memory ? &result.memory[r] : nullptr;
    if (trace) trace->push_back({0, rr.static_bytes});
    const std::vector<Op>& ops = schedule.ops_of(r);
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
      const MemoryEffect effect = schedule.EffectOf(ops[i].kind);
      saved += effect.saved * c.saved_bytes + effect.held * c.weight_grad_bytes;
      in_flight += effect.saved;
      if (ops[i].kind == OpKind::kBackward) rr.recompute_ns += c.recompute_ns;
      assert(saved >= 0 && in_flight >= 0 && "a backward frees only what its forward saved");
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
    assert(saved == 0 && in_flight == 0 && "every micro-batch's activations are freed by the end");
    rr.compute_end_ns = ops.empty() ? 0 : result.op_timing[r].back().end_ns;
    rr.finish_ns = rr.compute_end_ns + rr.update_ns;
    result.iteration_ns = std::max(result.iteration_ns, rr.finish_ns);
    if (rr.peak_memory_bytes > result.capacity_bytes) result.fits = false;
  }
}

Bubble ComputeBubble(const Schedule& schedule, const SimResult& result) {
  const Pipeline& p = schedule.pipeline();
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
  b.ideal = schedule.IdealBubble();
  b.recompute = static_cast<double>(recompute) / w;
  b.imbalance = b.real - b.ideal - b.recompute;
  return b;
}

}  // namespace

Result<SimResult> Simulate(const Schedule& schedule, const std::vector<StageCost>& stages,
                           const std::vector<RankCost>& ranks, Bytes capacity_bytes, const SimOptions& options) {
  const Pipeline& p = schedule.pipeline();
  if (static_cast<int>(stages.size()) != p.stages() || static_cast<int>(ranks.size()) != p.ranks ||
      static_cast<int>(schedule.rank_ops().size()) != p.ranks) {
    return InternalError("Simulate: stage or rank costs do not match the schedule's pipeline");
  }
  SimResult result;
  result.capacity_bytes = capacity_bytes;
  const Durations<TimeNs> durations = DurationsOf(stages, ranks);
  Status timed = TimeOps(schedule, durations, result);
  if (!timed.ok()) return timed.error();
  AccountRanks(schedule, stages, ranks, durations, options, result);
  result.bubble = ComputeBubble(schedule, result);
  return result;
}

Result<SimResult> SimulatePlan(const Problem& problem, const Plan& plan, const SimOptions& options) {
  Status valid = ValidatePlan(problem, plan);
  if (!valid.ok()) return valid.error();
  return Simulate(Schedule(problem.pipeline), ComputeStageCosts(problem, plan), ComputeRankCosts(problem, plan),
                  problem.memory_bytes, options);
}

}  // namespace bmpipe

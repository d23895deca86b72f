#include "bmpipe/sim/timing.h"

#include <algorithm>
#include <cassert>

namespace bmpipe {

template <typename Time>
Timing<Time> TimeSchedule(const Schedule& schedule, const Durations<Time>& durations, bool record_binding) {
  const Pipeline& p = schedule.pipeline();
  const bool split = p.SplitBackward();
  // Per op: its end once timed (>= 0); before that -1, or -2 - r when rank r is the first of the
  // ranks blocked on it (the others chained through next_waiter): any number may wait for one.
  constexpr Time kNotYet = Time(-1);
  std::vector<Time> end(static_cast<std::size_t>(schedule.num_op_ids()), kNotYet);
  std::vector<RankIdx> next_waiter(p.ranks, -1);
  std::vector<std::size_t> next(p.ranks, 0);
  std::vector<RankIdx> runnable;
  for (RankIdx r = p.ranks - 1; r >= 0; --r) runnable.push_back(r);

  Timing<Time> t;
  t.span.resize(p.ranks);
  if (record_binding) t.bound_by.resize(p.ranks);
  for (RankIdx r = 0; r < p.ranks; ++r) {
    t.span[r].resize(schedule.ops_of(r).size());
    if (record_binding) t.bound_by[r].resize(schedule.ops_of(r).size());
  }

  const bool actions = schedule.has_actions();
  const bool overlap = p.overlap;
  while (!runnable.empty()) {
    const RankIdx r = runnable.back();
    runnable.pop_back();
    const std::vector<Op>& ops = schedule.ops_of(r);
    while (next[r] < ops.size()) {
      // The action at position i: ops i..last, those after i joined to the one before. It waits
      // for its ops' dependencies outside it (Schedule::Dependencies, read here from the single
      // ops' edges in the same order, so that bound_by indexes that list), and its ops run back
      // to back; an op outside waiting for one of them waits for the action's end, which end[]
      // holds for each of its ops.
      const std::size_t i = next[r];
      std::size_t last = i;
      if (actions) {
        while (last + 1 < ops.size() && ops[last + 1].joined) ++last;
      }
      Time ready = 0;
      int binding = -1;
      int index = 0;
      bool waits = false;
      for (std::size_t k = i; k <= last && !waits; ++k) {
        for (const OpEdge& e : schedule.OpDependencies(ops[k])) {
          bool inside = false;
          for (std::size_t q = i; q < k && !inside; ++q) inside = schedule.IdOf(ops[q]) == e.op;
          if (inside) continue;
          Time& dep = end[e.op];
          if (dep < Time(0)) {
            next_waiter[r] = static_cast<RankIdx>(-2 - dep);  // -1 when none waited before
            dep = Time(-2 - r);
            waits = true;
            break;
          }
          const Time at = dep + (e.crosses_ranks ? durations.p2p_out[e.boundary] : Time(0));
          if (binding < 0 || at > ready) {
            ready = at;
            binding = index;
          }
          ++index;
        }
      }
      if (waits) break;
      const Time previous = i == 0 ? Time(0) : t.span[r][i - 1].end_ns;
      Time at = std::max(previous, ready);
      if (record_binding) {
        const bool by_dependency = binding >= 0 && ready >= previous && (i == 0 || ready > previous);
        t.bound_by[r][i] = static_cast<std::int8_t>(by_dependency ? binding : -1);
      }
      // Only an overlapped pipeline's actions can differ from their ops in turn.
      const ActionTimes<Time> times = overlap ? TimeAction(durations, ops, i, last, split, true) : ActionTimes<Time>{};
      for (std::size_t k = i; k <= last; ++k) {
        const Time duration = overlap && k - i < 3 ? times.op[k - i] : DurationOf(durations, ops[k], split);
        assert(duration >= Time(0) && ready >= Time(0) && "durations are non-negative and bounded (kMaxIterationNs)");
        t.span[r][k] = {at, at + duration};
        at += duration;
        if (record_binding && k > i) t.bound_by[r][k] = -1;  // the op before it on the rank
      }
      for (std::size_t k = i; k <= last; ++k) {
        Time& self = end[schedule.IdOf(ops[k])];
        // Wake the ranks blocked on this op.
        for (RankIdx w = static_cast<RankIdx>(-2 - self); w >= 0; w = next_waiter[w]) runnable.push_back(w);
        self = at;
      }
      next[r] = last + 1;
    }
  }
  for (RankIdx r = 0; r < p.ranks; ++r) {
    if (next[r] < schedule.ops_of(r).size()) {
      t.complete = false;
      t.stuck_rank = r;
      t.stuck_position = next[r];
      return t;
    }
  }
  for (RankIdx r = 0; r < p.ranks; ++r) {
    const Time last = schedule.ops_of(r).empty() ? Time(0) : t.span[r].back().end_ns;
    const Time finish = last + durations.rank_update[r];
    if (r == 0 || finish > t.iteration) {
      t.iteration = finish;
      t.last_rank = r;
    }
  }
  return t;
}

template <typename Time>
PathCoefficients CriticalPath(const Schedule& schedule, const Durations<Time>& durations, const Timing<Time>& timing,
                              RankIdx end_rank) {
  const Pipeline& p = schedule.pipeline();
  PathCoefficients path;
  path.forward.assign(p.stages(), 0);
  path.backward.assign(p.stages(), 0);
  path.weight_grad.assign(p.stages(), 0);
  path.hops.assign(std::max(p.stages() - 1, 0), 0);
  if (p.overlap) {
    path.forward_comm.assign(p.stages(), 0);
    path.backward_comm.assign(p.stages(), 0);
  }
  if (!timing.complete || timing.bound_by.empty()) return path;
  if (durations.rank_update[end_rank] != Time(0)) path.update_rank = end_rank;

  RankIdx r = end_rank;
  if (schedule.ops_of(r).empty()) return path;
  std::size_t i = schedule.ops_of(r).size() - 1;
  const bool split = p.SplitBackward();
  while (true) {
    const std::vector<Op>& ops = schedule.ops_of(r);
    const Op& op = ops[i];
    // An op of an overlapped pair counts its phase (TimeAction).
    ActionTimes<Time> action;
    std::size_t first = i;
    if (p.overlap && op.kind != OpKind::kWeightGrad) {
      const auto [begin, last] = ActionAround(ops, i);
      first = begin;
      action = TimeAction(durations, ops, first, last, split, true);
    }
    if (action.pair && i == first) {
      if (action.forward_by_comm) {
        path.backward_comm[ops[first + 1].stage] += 1;
      } else {
        path.forward[op.stage] += 1;
        path.forward_comm[op.stage] -= 1;
      }
    } else if (action.pair && i == first + 1) {
      if (action.backward_by_comm) {
        path.forward_comm[ops[first].stage] += 1;
        if (action.weight_joined) path.weight_grad[op.stage] -= 1;
      } else {
        path.backward[op.stage] += 1;
        if (split) path.weight_grad[op.stage] -= 1;
        path.backward_comm[op.stage] -= 1;
      }
    } else {
      switch (op.kind) {
        case OpKind::kForward:
          path.forward[op.stage] += 1;
          break;
        case OpKind::kBackward:
          path.backward[op.stage] += 1;
          if (split) path.weight_grad[op.stage] -= 1;
          break;
        case OpKind::kWeightGrad:
          path.weight_grad[op.stage] += 1;
          break;
      }
    }
    const int binding = timing.bound_by[r][i];
    if (binding >= 0) {
      const OpEdge& e = schedule.Dependencies(op).edge[binding];
      if (e.crosses_ranks) path.hops[e.boundary] += 1;
      r = schedule.RankOfOp(e.op);
      i = schedule.PositionOf(e.op);
    } else if (i > 0) {
      --i;
    } else {
      break;
    }
  }
  return path;
}

template <typename Time>
Time PathLength(const PathCoefficients& path, const Durations<Time>& durations) {
  Time length = 0;
  for (std::size_t s = 0; s < path.forward.size(); ++s) {
    length += Time(path.forward[s]) * durations.forward[s] + Time(path.backward[s]) * durations.backward[s];
    if (path.weight_grad[s] != 0) length += Time(path.weight_grad[s]) * durations.weight_grad[s];
  }
  for (std::size_t s = 0; s < path.hops.size(); ++s) length += Time(path.hops[s]) * durations.p2p_out[s];
  for (std::size_t s = 0; s < path.forward_comm.size(); ++s) {
    length += Time(path.forward_comm[s]) * durations.forward_comm[s] + Time(path.backward_comm[s]) * durations.backward_comm[s];
  }
  if (path.update_rank >= 0) length += durations.rank_update[path.update_rank];
  return length;
}

template Timing<std::int64_t> TimeSchedule(const Schedule&, const Durations<std::int64_t>&, bool);
template Timing<double> TimeSchedule(const Schedule&, const Durations<double>&, bool);
template PathCoefficients CriticalPath(const Schedule&, const Durations<std::int64_t>&, const Timing<std::int64_t>&,
                                       RankIdx);
template PathCoefficients CriticalPath(const Schedule&, const Durations<double>&, const Timing<double>&, RankIdx);
template std::int64_t PathLength(const PathCoefficients&, const Durations<std::int64_t>&);
template double PathLength(const PathCoefficients&, const Durations<double>&);

}  // namespace bmpipe

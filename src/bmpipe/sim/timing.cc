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
  t.start.resize(p.ranks);
  t.end.resize(p.ranks);
  if (record_binding) t.bound_by.resize(p.ranks);
  for (RankIdx r = 0; r < p.ranks; ++r) {
    t.start[r].resize(schedule.ops_of(r).size());
    t.end[r].resize(schedule.ops_of(r).size());
    if (record_binding) t.bound_by[r].resize(schedule.ops_of(r).size());
  }

  while (!runnable.empty()) {
    const RankIdx r = runnable.back();
    runnable.pop_back();
    const std::vector<Op>& ops = schedule.ops_of(r);
    while (next[r] < ops.size()) {
      const std::size_t i = next[r];
      const Op& op = ops[i];
      Time ready = 0;
      int binding = -1;
      bool waits = false;
      const OpEdges deps = schedule.Dependencies(op);
      const OpEdge* first = deps.begin();
      for (const OpEdge* e = first; e != deps.end(); ++e) {
        Time& dep = end[e->op];
        if (dep < Time(0)) {
          next_waiter[r] = static_cast<RankIdx>(-2 - dep);  // -1 when none waited before
          dep = Time(-2 - r);
          waits = true;
          break;
        }
        const Time at = dep + (e->crosses_ranks ? durations.p2p_out[e->boundary] : Time(0));
        if (binding < 0 || at > ready) {
          ready = at;
          binding = static_cast<int>(e - first);
        }
      }
      if (waits) break;
      const Time previous = i == 0 ? Time(0) : t.end[r][i - 1];
      const Time start = std::max(previous, ready);
      const Time duration = DurationOf(durations, op, split);
      assert(duration >= Time(0) && ready >= Time(0) && "durations are non-negative and bounded (kMaxIterationNs)");
      t.start[r][i] = start;
      t.end[r][i] = start + duration;
      if (record_binding) {
        const bool by_dependency = binding >= 0 && ready >= previous && (i == 0 || ready > previous);
        t.bound_by[r][i] = static_cast<std::int8_t>(by_dependency ? binding : -1);
      }
      Time& self = end[schedule.IdOf(op)];
      // Wake the ranks blocked on this op.
      for (RankIdx w = static_cast<RankIdx>(-2 - self); w >= 0; w = next_waiter[w]) runnable.push_back(w);
      self = start + duration;
      ++next[r];
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
    const Time last = schedule.ops_of(r).empty() ? Time(0) : t.end[r].back();
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
  if (!timing.complete || timing.bound_by.empty()) return path;
  if (durations.rank_update[end_rank] != Time(0)) path.update_rank = end_rank;

  RankIdx r = end_rank;
  if (schedule.ops_of(r).empty()) return path;
  std::size_t i = schedule.ops_of(r).size() - 1;
  const bool split = p.SplitBackward();
  while (true) {
    const Op& op = schedule.ops_of(r)[i];
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

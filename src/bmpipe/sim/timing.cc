#include "bmpipe/sim/timing.h"

#include <algorithm>
#include <cassert>

namespace bmpipe {
namespace {

// Index of an op in per-op tables: forwards first, then backwards, stage-major.
struct OpIndex {
  int stages;
  int micro_batches;
  std::int64_t operator()(OpKind kind, StageIdx s, MicroBatchIdx j) const {
    const std::int64_t base = kind == OpKind::kForward ? 0 : std::int64_t{stages} * micro_batches;
    return base + std::int64_t{s} * micro_batches + j;
  }
};

}  // namespace

template <typename Time>
Timing<Time> TimeSchedule(const Schedule& schedule, const Durations<Time>& durations, bool record_binding) {
  const Pipeline& p = schedule.pipeline;
  const OpIndex index{p.stages(), p.micro_batches};
  constexpr Time kNotYet = Time(-1);
  std::vector<Time> end(2 * static_cast<std::size_t>(p.stages()) * p.micro_batches, kNotYet);
  std::vector<std::size_t> next(p.ranks, 0);
  std::vector<std::int64_t> waiting_for(p.ranks, -1);
  std::vector<RankIdx> runnable;
  for (RankIdx r = p.ranks - 1; r >= 0; --r) runnable.push_back(r);

  Timing<Time> t;
  t.start.resize(p.ranks);
  t.end.resize(p.ranks);
  if (record_binding) t.bound_by_dependency.resize(p.ranks);
  for (RankIdx r = 0; r < p.ranks; ++r) {
    t.start[r].resize(schedule.rank_ops[r].size());
    t.end[r].resize(schedule.rank_ops[r].size());
    if (record_binding) t.bound_by_dependency[r].resize(schedule.rank_ops[r].size());
  }

  while (!runnable.empty()) {
    const RankIdx r = runnable.back();
    runnable.pop_back();
    const std::vector<Op>& ops = schedule.rank_ops[r];
    while (next[r] < ops.size()) {
      const std::size_t i = next[r];
      const Op& op = ops[i];
      const Dependency dep = DependencyOf(p, op);
      Time ready = 0;
      if (dep.exists) {
        const std::int64_t k = index(dep.op.kind, dep.op.stage, dep.op.micro_batch);
        if (end[k] == kNotYet) {
          waiting_for[r] = k;
          break;
        }
        ready = end[k] + (dep.crosses_ranks ? durations.p2p_out[dep.boundary] : Time(0));
      }
      const Time previous = i == 0 ? Time(0) : t.end[r][i - 1];
      const Time start = std::max(previous, ready);
      const Time duration = op.kind == OpKind::kForward ? durations.forward[op.stage] : durations.backward[op.stage];
      assert(duration >= Time(0) && ready >= Time(0) && "durations are non-negative and bounded (kMaxIterationNs)");
      t.start[r][i] = start;
      t.end[r][i] = start + duration;
      if (record_binding) t.bound_by_dependency[r][i] = dep.exists && ready >= previous && (i == 0 || ready > previous);
      const std::int64_t self = index(op.kind, op.stage, op.micro_batch);
      end[self] = start + duration;
      ++next[r];
      // Wake the rank whose next op waits for this one (each op has at most one dependent).
      RankIdx dependent = -1;
      if (op.kind == OpKind::kForward) {
        dependent = op.stage + 1 < p.stages() ? p.RankOf(op.stage + 1) : r;
      } else if (op.stage > 0) {
        dependent = p.RankOf(op.stage - 1);
      }
      if (dependent >= 0 && dependent != r && waiting_for[dependent] == self) {
        waiting_for[dependent] = -1;
        runnable.push_back(dependent);
      }
    }
  }
  for (RankIdx r = 0; r < p.ranks; ++r) {
    if (next[r] < schedule.rank_ops[r].size()) {
      t.complete = false;
      t.stuck_rank = r;
      t.stuck_position = next[r];
      return t;
    }
  }
  for (RankIdx r = 0; r < p.ranks; ++r) {
    const Time last = schedule.rank_ops[r].empty() ? Time(0) : t.end[r].back();
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
  const Pipeline& p = schedule.pipeline;
  PathCoefficients path;
  path.forward.assign(p.stages(), 0);
  path.backward.assign(p.stages(), 0);
  path.hops.assign(std::max(p.stages() - 1, 0), 0);
  if (!timing.complete || timing.bound_by_dependency.empty()) return path;
  if (durations.rank_update[end_rank] != Time(0)) path.update_rank = end_rank;

  // Where each op sits in its rank's order.
  const OpIndex index{p.stages(), p.micro_batches};
  std::vector<std::size_t> position(2 * static_cast<std::size_t>(p.stages()) * p.micro_batches);
  for (RankIdx r = 0; r < p.ranks; ++r) {
    for (std::size_t i = 0; i < schedule.rank_ops[r].size(); ++i) {
      const Op& op = schedule.rank_ops[r][i];
      position[index(op.kind, op.stage, op.micro_batch)] = i;
    }
  }
  RankIdx r = end_rank;
  if (schedule.rank_ops[r].empty()) return path;
  std::size_t i = schedule.rank_ops[r].size() - 1;
  while (true) {
    const Op& op = schedule.rank_ops[r][i];
    (op.kind == OpKind::kForward ? path.forward : path.backward)[op.stage] += 1;
    if (timing.bound_by_dependency[r][i]) {
      const Dependency dep = DependencyOf(p, op);
      if (dep.crosses_ranks) path.hops[dep.boundary] += 1;
      r = p.RankOf(dep.op.stage);
      i = position[index(dep.op.kind, dep.op.stage, dep.op.micro_batch)];
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

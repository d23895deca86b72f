#include "bmpipe/solve/local_search.h"

#include <algorithm>

#include "bmpipe/solve/linear_model.h"

namespace bmpipe {

PlanBuilder::PlanBuilder(const Problem& problem, const Candidates& candidates, const Schedule& schedule)
    : problem_(problem), candidates_(candidates), schedule_(schedule) {
  if (problem_.pipeline.overlap) return;  // TimeFloor is 0
  const Pipeline& p = problem_.pipeline;
  crosses_.assign(p.stages(), false);
  for (StageIdx s = 0; s + 1 < p.stages(); ++s) {
    bool every = true;
    for (int copy = 0; copy < p.Copies(); ++copy) every = every && p.RankOf(s, copy) != p.RankOf(s + 1, copy);
    crosses_[s] = every;
  }
  rank_ops_.resize(problem_.pipeline.ranks);
  for (RankIdx r = 0; r < problem_.pipeline.ranks; ++r) {
    const std::vector<Op>& ops = schedule_.ops_of(r);
    RankOps& out = rank_ops_[r];
    if (ops.empty()) continue;
    if (ops.front().kind == OpKind::kForward) out.first_forward = ops.front().stage;
    if (ops.back().kind == OpKind::kBackward) out.last_backward = ops.back().stage;
    for (const Op& op : ops) {
      if (op.kind == OpKind::kBackward && out.first_backward < 0) out.first_backward = op.stage;
      std::vector<StageOps>& part = out.first_backward < 0 ? out.warm_up : out.rest;
      auto at = std::find_if(part.begin(), part.end(), [&](const StageOps& c) { return c.stage == op.stage; });
      if (at == part.end()) at = part.insert(part.end(), StageOps{op.stage});
      (op.kind == OpKind::kForward ? at->forwards : op.kind == OpKind::kBackward ? at->backwards : at->weight_grads) += 1;
    }
  }
}

std::vector<int> PlanBuilder::Compatible(StageIdx s, LayerIdx start, int length) const {
  std::vector<int> out;
  if (length <= 0 || length > problem_.num_layers()) return out;
  // A stage's candidates are sorted by length first (GenerateCandidates).
  const std::vector<Candidate>& all = candidates_.per_stage[s];
  auto at = std::lower_bound(all.begin(), all.end(), length,
                             [](const Candidate& c, int l) { return c.length < l; });
  for (; at != all.end() && at->length == length; ++at) {
    if (start >= at->start_min && start <= at->start_max) out.push_back(static_cast<int>(at - all.begin()));
  }
  return out;
}

Bytes PlanBuilder::Excess(const CandidatePlan& plan) const {
  if (candidates_.memory_exact) return 0;
  std::vector<const Candidate*> chosen(plan.choice.size());
  for (std::size_t s = 0; s < plan.choice.size(); ++s) chosen[s] = &candidates_.per_stage[s][plan.choice[s]];
  Bytes excess = 0;
  for (RankIdx r = 0; r < problem_.pipeline.ranks; ++r) {
    excess += std::max<Bytes>(0, RankPeakMemory(problem_, candidates_, r, chosen) - problem_.memory_bytes);
  }
  return excess;
}

bool PlanBuilder::Fits(const CandidatePlan& plan) const { return Excess(plan) == 0; }

Plan PlanBuilder::ToPlan(const CandidatePlan& plan) const {
  Plan out;
  out.option.assign(problem_.num_layers(), 0);
  LayerIdx start = 0;
  for (std::size_t s = 0; s < plan.choice.size(); ++s) {
    out.stage_begin.push_back(start);
    AssignOptions(candidates_.per_stage[s][plan.choice[s]], start, out);
    start = plan.end[s];
  }
  out.stage_begin.push_back(start);
  return out;
}

std::optional<CandidatePlan> PlanBuilder::Complete(const std::vector<int>& end, const std::vector<int>* preferred,
                                                   bool allow_over) const {
  const int stages = static_cast<int>(end.size());
  CandidatePlan plan{end, std::vector<int>(stages, -1)};
  std::vector<std::vector<int>> options(stages);
  for (StageIdx s = 0; s < stages; ++s) {
    const int start = s == 0 ? 0 : end[s - 1];
    options[s] = Compatible(s, start, end[s] - start);
    if (options[s].empty()) return std::nullopt;
    auto time_of = [&](int k) {
      const StageCost& c = candidates_.per_stage[s][k].cost;
      return c.forward_ns + c.backward_ns;
    };
    plan.choice[s] = *std::min_element(options[s].begin(), options[s].end(),
                                       [&](int a, int b) { return time_of(a) < time_of(b); });
    if (preferred != nullptr && std::find(options[s].begin(), options[s].end(), (*preferred)[s]) != options[s].end()) {
      plan.choice[s] = (*preferred)[s];
    }
  }
  if (candidates_.memory_exact) return plan;
  // Repair ranks over capacity: repeatedly take, among the rank's stages, the switch to a
  // candidate with fewer bytes at the rank's peak that costs the least time per byte saved.
  const Pipeline& p = problem_.pipeline;
  for (RankIdx r = 0; r < p.ranks; ++r) {
    std::vector<const Candidate*> chosen(stages);
    auto refresh = [&] {
      for (StageIdx s = 0; s < stages; ++s) chosen[s] = &candidates_.per_stage[s][plan.choice[s]];
    };
    refresh();
    Bytes peak = RankPeakMemory(problem_, candidates_, r, chosen);
    while (peak > problem_.memory_bytes) {
      double best_ratio = kInfinity;
      StageIdx best_stage = -1;
      int best_k = -1;
      Bytes best_peak = peak;
      for (int c = 0; c < p.chunks; ++c) {
        const StageIdx s = p.StageAt(r, c);
        const Candidate* current = chosen[s];
        for (int k : options[s]) {
          chosen[s] = &candidates_.per_stage[s][k];
          const Bytes after = RankPeakMemory(problem_, candidates_, r, chosen);
          chosen[s] = current;
          if (after >= peak) continue;
          const double extra = static_cast<double>(candidates_.per_stage[s][k].cost.backward_ns +
                                                   candidates_.per_stage[s][k].cost.forward_ns -
                                                   current->cost.backward_ns - current->cost.forward_ns);
          const double ratio = std::max(extra, 0.0) / static_cast<double>(peak - after);
          if (ratio < best_ratio || (ratio == best_ratio && after < best_peak)) {
            best_ratio = ratio;
            best_stage = s;
            best_k = k;
            best_peak = after;
          }
        }
      }
      if (best_stage < 0) {
        if (!allow_over) return std::nullopt;
        break;
      }
      plan.choice[best_stage] = best_k;
      refresh();
      peak = best_peak;
    }
  }
  return plan;
}

Durations<TimeNs> PlanBuilder::DurationsOf(const CandidatePlan& plan) const {
  // The simulator's durations (docs/semantics.md) from the candidates' costs, which equal ComputeStageCost's.
  Durations<TimeNs> d;
  d.rank_update.assign(problem_.pipeline.ranks, 0);
  for (std::size_t s = 0; s < plan.choice.size(); ++s) {
    const Candidate& c = candidates_.per_stage[s][plan.choice[s]];
    d.forward.push_back(c.cost.forward_ns);
    d.backward.push_back(c.cost.backward_ns);
    d.weight_grad.push_back(c.cost.weight_grad_ns);
    d.p2p_out.push_back(c.cost.p2p_out_ns);
    d.forward_comm.push_back(c.cost.forward_comm_ns);
    d.backward_comm.push_back(c.cost.backward_comm_ns);
    for (int copy = 0; copy < problem_.pipeline.Copies(); ++copy) {
      d.rank_update[problem_.pipeline.RankOf(static_cast<StageIdx>(s), copy)] += c.update_ns;
    }
  }
  return d;
}

PlanBuilder::Score PlanBuilder::Evaluate(const CandidatePlan& plan) const { return Evaluate(plan, DurationsOf(plan)); }

PlanBuilder::Score PlanBuilder::Evaluate(const CandidatePlan& plan, const Durations<TimeNs>& d) const {
  Score score;
  score.excess = Excess(plan);
  // Plans over capacity are compared by their excess alone: no need to time them.
  if (score.excess > 0) return score;
  score.iteration_ns = TimeSchedule(schedule_, d, /*record_binding=*/false).iteration;
  return score;
}

TimeNs PlanBuilder::TimeFloor(const CandidatePlan& plan) const { return TimeFloor(DurationsOf(plan)); }

TimeNs PlanBuilder::TimeFloor(const Durations<TimeNs>& d) const {
  if (rank_ops_.empty()) return 0;
  const bool split = problem_.pipeline.SplitBackward();
  // Every op of stage s waits for its micro-batch's forward through the stages before it, a
  // backward of stage s also for its forward through the later stages and their backward parts
  // (less W when split); after a backward of stage s, the backward parts of the stages before it
  // run. Each step from stage s to s + 1 or back that crosses ranks in every copy adds stage s's
  // p2p time (crossed[s]).
  const std::size_t stages = d.forward.size();
  std::vector<TimeNs> forward_before(stages + 1, 0), backward_before(stages + 1, 0), crossed_before(stages + 1, 0);
  for (std::size_t s = 0; s < stages; ++s) {
    forward_before[s + 1] = forward_before[s] + d.forward[s];
    backward_before[s + 1] = backward_before[s] + d.backward[s] - (split ? d.weight_grad[s] : 0);
    crossed_before[s + 1] = crossed_before[s] + (s + 1 < stages && crosses_[s] ? d.p2p_out[s] : 0);
  }
  const TimeNs round_trip = forward_before[stages] + crossed_before[stages];  // to the last stage's backward
  auto busy = [&](const std::vector<StageOps>& part) {
    TimeNs sum = 0;
    for (const StageOps& c : part) {
      const TimeNs w = split ? d.weight_grad[c.stage] : 0;
      sum += c.forwards * d.forward[c.stage] + c.backwards * (d.backward[c.stage] - w) + c.weight_grads * w;
    }
    return sum;
  };
  TimeNs floor = 0;
  for (RankIdx r = 0; r < static_cast<RankIdx>(rank_ops_.size()); ++r) {
    const RankOps& ops = rank_ops_[r];
    const StageIdx first = ops.first_forward, back = ops.first_backward, last = ops.last_backward;
    TimeNs at = (first >= 0 ? forward_before[first] + crossed_before[first] : 0) + busy(ops.warm_up);
    if (back >= 0) {
      at = std::max(at, round_trip + backward_before[stages] - backward_before[back + 1] + crossed_before[stages] -
                            crossed_before[back]);
    }
    const TimeNs after = last >= 0 ? backward_before[last] + crossed_before[last] : 0;
    floor = std::max(floor, at + busy(ops.rest) + std::max(d.rank_update[r], after));
  }
  return floor;
}

std::optional<PlanBuilder::Score> PlanBuilder::EvaluateIfBetter(const CandidatePlan& plan,
                                                                const Score& incumbent) const {
  // Against an incumbent that fits, only a plan that fits and is faster is better: the floor
  // (cheaper than the memory check) first.
  const Durations<TimeNs> d = DurationsOf(plan);
  if (incumbent.excess == 0 && TimeFloor(d) >= incumbent.iteration_ns) return std::nullopt;
  const Score score = Evaluate(plan, d);
  if (!(score < incumbent)) return std::nullopt;
  return score;
}

CandidatePlan ImproveLocally(const PlanBuilder& builder, CandidatePlan current, const Deadline& deadline) {
  // Each move is timed by the simulator's timing core (microseconds to a second): the clock is
  // read before every one.
  auto out_of_time = [&] { return deadline.Expired(); };
  const int stages = static_cast<int>(current.end.size());
  PlanBuilder::Score value = builder.Evaluate(current);
  bool improved = true;
  while (improved && !out_of_time()) {
    improved = false;
    // Move one layer from stage a to stage b (any two stages): the boundaries between them all
    // shift by one; the stages in between keep their size.
    for (StageIdx a = 0; a < stages && !out_of_time(); ++a) {
      for (StageIdx b = 0; b < stages && !out_of_time(); ++b) {
        if (a == b) continue;
        std::vector<int> end = current.end;
        const int size_a = end[a] - (a == 0 ? 0 : end[a - 1]);
        if (size_a <= 1) continue;
        if (a < b) {
          for (StageIdx s = a; s < b; ++s) end[s] -= 1;
        } else {
          for (StageIdx s = b; s < a; ++s) end[s] += 1;
        }
        std::optional<CandidatePlan> next = builder.Complete(end, &current.choice, /*allow_over=*/true);
        if (!next) continue;
        if (const std::optional<PlanBuilder::Score> v = builder.EvaluateIfBetter(*next, value)) {
          current = *next;
          value = *v;
          improved = true;
        }
      }
    }
    // Other candidates for the same block.
    for (StageIdx s = 0; s < stages && !out_of_time(); ++s) {
      const int start = s == 0 ? 0 : current.end[s - 1];
      for (int k : builder.Compatible(s, start, current.end[s] - start)) {
        if (k == current.choice[s] || out_of_time()) continue;
        CandidatePlan next = current;
        next.choice[s] = k;
        if (const std::optional<PlanBuilder::Score> v = builder.EvaluateIfBetter(next, value)) {
          current = next;
          value = *v;
          improved = true;
        }
      }
    }
  }
  return current;
}

}  // namespace bmpipe

#include "bmpipe/solve/family_bound.h"

#include <algorithm>
#include <functional>

#include "bmpipe/sim/timing.h"
#include "bmpipe/solve/linear_model.h"

namespace bmpipe {
namespace {

// The state of the dynamic program, per group: the sum of pi so far and the largest member so
// far; and the largest backward so far (for the cool-down group). Lower is better in all.
struct State {
  double pi[FamilyBound::kMaxGroups];
  double worst[FamilyBound::kMaxGroups];
  double max_backward;
  // Where it came from, to read a plan back: its parent's index among the states ending at layer
  // `from` one stage earlier, and the candidate taken. A merged state keeps its first state's, so
  // the plan read back is real, but not always the minimum's.
  int from = -1, parent = -1, choice = -1;
};

// A position's states are pruned as soon as they reach this many times the cap (at least 256), so
// that sorts stay short (the deadline is polled between them) and memory small: on the planning
// benchmark, pruning at 256 instead of 32,768 halved the dynamic program's time (96 layers, 4 ranks
// × 2 chunks: 3.8 → 1.7 s) and never lowered the bound.
constexpr std::size_t kPruneAtTimesCap = 4;
constexpr std::size_t kPruneAtLeast = 256;

// The most op timings the cool-down group may take (it times the schedule once per pair of
// stages): beyond, it is left out.
constexpr double kMaxCoolDownOpTimings = 4e7;

bool Dominates(const State& a, const State& b, int groups) {
  for (int g = 0; g < groups; ++g) {
    if (a.pi[g] > b.pi[g] || a.worst[g] > b.worst[g]) return false;
  }
  return a.max_backward <= b.max_backward;
}

// Keeps the states no kept state is at least as good as in every number, in sorted order, up to
// max_states - 1; everything after that is merged into one state taking the least of each number.
// The cost is at most max_states dominance checks per state.
void Prune(std::vector<State>& states, int groups, std::size_t max_states) {
  std::sort(states.begin(), states.end(), [groups](const State& a, const State& b) {
    for (int g = 0; g < groups; ++g) {
      if (a.pi[g] != b.pi[g]) return a.pi[g] < b.pi[g];
    }
    for (int g = 0; g < groups; ++g) {
      if (a.worst[g] != b.worst[g]) return a.worst[g] < b.worst[g];
    }
    return a.max_backward < b.max_backward;
  });
  std::vector<State> kept;
  bool merging = false;
  State merged{};
  for (const State& s : states) {
    if (merging) {
      for (int g = 0; g < groups; ++g) {
        merged.pi[g] = std::min(merged.pi[g], s.pi[g]);
        merged.worst[g] = std::min(merged.worst[g], s.worst[g]);
      }
      merged.max_backward = std::min(merged.max_backward, s.max_backward);
      continue;
    }
    bool dominated = false;
    for (const State& k : kept) {
      if (Dominates(k, s, groups)) {
        dominated = true;
        break;
      }
    }
    if (dominated) continue;
    if (kept.size() + 1 < max_states) {
      kept.push_back(s);
    } else {
      merging = true;
      merged = s;
    }
  }
  if (merging) kept.push_back(merged);
  states.swap(kept);
}

}  // namespace

FamilyBound::FamilyBound(const Problem& problem, const Candidates& candidates, const Schedule& schedule,
                         const Deadline& deadline)
    : problem_(problem), candidates_(candidates) {
  const Pipeline& p = problem.pipeline;
  const int stages = p.stages();
  // Its weights price F, B and p2p; a split backward's paths also use W, and overlapped pairs'
  // paths their communication.
  if (p.SplitBackward() || p.overlap) {
    available_ = false;
    return;
  }
  // The critical path of the durations `shape` sets on unit ones (forward 1, backward `backward`).
  auto path_of = [&](double backward, const std::function<void(Durations<double>&)>& shape) {
    Durations<double> d;
    d.forward.assign(stages, 1);
    d.backward.assign(stages, backward);
    d.p2p_out.assign(stages, 0);
    d.rank_update.assign(p.ranks, 0);
    shape(d);
    const Timing<double> timing = TimeSchedule(schedule, d, /*record_binding=*/true);
    return CriticalPath(schedule, d, timing, timing.last_rank);
  };
  auto weights = [&](const PathCoefficients& path, StageIdx s) {
    return Weights{static_cast<double>(path.forward[s]), static_cast<double>(path.backward[s]),
                   s + 1 < stages ? static_cast<double>(path.hops[s]) : 0.0};
  };
  auto lower = [](Weights& into, const Weights& w) {
    into.forward = std::min(into.forward, w.forward);
    into.backward = std::min(into.backward, w.backward);
    into.p2p = std::min(into.p2p, w.p2p);
  };
  auto empty_group = [&] {
    Group group;
    group.before.assign(stages, {kInfinity, kInfinity, kInfinity});
    group.after.assign(stages, {kInfinity, kInfinity, kInfinity});
    group.at.assign(stages, {kInfinity, kInfinity, kInfinity});
    return group;
  };
  auto finish = [&](Group& group) {
    // The last stage is never before s*, the first never after it.
    group.before[stages - 1] = {0, 0, 0};
    group.after[0] = {0, 0, 0};
    groups_.push_back(std::move(group));
  };
  // Single-bottleneck groups: stage s* slower in forward and backward (mildly, or so much that its
  // rank's own ops are the path), or a backward-heavy s* (on forward 1, backward 2: its steady
  // state is the slowest and its cool-down backwards outlast the round trips after it).
  // (The cool-down members are one chunk per rank's: with several, a rank's chunks are spread
  // over the stage order, and the extra groups only made the dynamic program slower.)
  struct Slowdown {
    double base_backward, forward, backward;
    bool one_chunk_only;
  };
  const bool one_chunk = p.chunks == 1;
  for (const Slowdown slowdown :
       {Slowdown{1, 1.1, 1.1, false}, Slowdown{1, 1e6, 1e6, false}, Slowdown{2, 0.01, 3.5, true}}) {
    if (slowdown.one_chunk_only && !one_chunk) break;
    Group group = empty_group();
    for (StageIdx target = 0; target < stages; ++target) {
      if (deadline.Expired()) break;
      const PathCoefficients path = path_of(slowdown.base_backward, [&](Durations<double>& d) {
        d.forward[target] = slowdown.forward;
        d.backward[target] = slowdown.backward;
      });
      for (StageIdx s = 0; s < stages; ++s) {
        lower(s < target ? group.before[s] : s == target ? group.at[s] : group.after[s], weights(path, s));
      }
      if (target + 1 == stages) finish(group);
    }
  }
  // The cool-down group: stage a* the bottleneck of the steady state, and an earlier stage c whose
  // backward is the slowest, so that the backwards left after a*'s steady state queue at c. Its
  // member (a*, c) is lowered to: before-a* classes, a*'s class, after-a* classes, plus
  // cool[a*] times c's backward, where cool[a*] is the least excess of c's backward coefficient over
  // its before-class over the c < a*. The dynamic program takes the c with the largest backward.
  const double op_timings = 0.5 * stages * stages * static_cast<double>(schedule.num_op_ids());
  if (one_chunk && groups_.size() == 3 && stages >= 3 && op_timings <= kMaxCoolDownOpTimings) {
    Group group = empty_group();
    // backward_of[a][c]: c's backward coefficient in member (a, c).
    std::vector<std::vector<double>> backward_of(stages, std::vector<double>(stages, 0));
    bool complete = true;
    for (StageIdx a = 0; a < stages && complete; ++a) {
      for (StageIdx c = a == 0 ? -1 : 0; c < a; ++c) {
        if (deadline.Expired()) {
          complete = false;
          break;
        }
        const PathCoefficients path = path_of(2, [&](Durations<double>& d) {
          d.forward[a] = 1.6;
          d.backward[a] = 2.3;
          if (c >= 0) {
            d.forward[c] = 0.01;
            d.backward[c] = 3.5;
          }
        });
        for (StageIdx s = 0; s < stages; ++s) {
          Weights w = weights(path, s);
          if (s == c) {
            backward_of[a][c] = w.backward;
            w.backward = kInfinity;  // c's backward is priced by cool[a], not its before class
          }
          lower(s < a ? group.before[s] : s == a ? group.at[s] : group.after[s], w);
        }
      }
    }
    if (complete) {
      // (A stage that is c in every member it is before: no before class of its own backward.)
      for (StageIdx s = 0; s + 1 < stages; ++s) {
        if (group.before[s].backward == kInfinity) group.before[s].backward = 0;
      }
      group.cool.assign(stages, 0);
      for (StageIdx a = 1; a < stages; ++a) {
        double least = kInfinity;
        for (StageIdx c = 0; c < a; ++c) least = std::min(least, backward_of[a][c] - group.before[c].backward);
        // A negative excess would make a smaller backward price more: such an a* has no member.
        group.cool[a] = least >= 0 ? least : -1;
      }
      finish(group);
    }
  }
  available_ = !groups_.empty();
}

double FamilyBound::Bound(const std::vector<int>& end_lo, const std::vector<int>& end_hi,
                          const std::vector<int>& k_lo, const std::vector<int>& k_hi, const Deadline& deadline,
                          CandidatePlan* plan, std::size_t max_states) const {
  if (plan != nullptr) *plan = {};
  if (!available_) return 0;
  DeadlinePoll poll(deadline);
  const int stages = problem_.pipeline.stages();
  const int n = problem_.num_layers();
  const int groups = static_cast<int>(groups_.size());
  const std::size_t prune_at = std::max(kPruneAtLeast, kPruneAtTimesCap * max_states);
  // Only the cool-down group reads the largest backward; without it, it stays 0 (no state split).
  const bool has_cool = std::any_of(groups_.begin(), groups_.end(), [](const Group& g) { return !g.cool.empty(); });
  auto cost = [](const Weights& w, const Candidate& c) {
    return w.forward * static_cast<double>(c.cost.forward_ns) + w.backward * static_cast<double>(c.cost.backward_ns) +
           w.p2p * static_cast<double>(c.cost.p2p_out_ns);
  };
  // states[e]: the states of plans whose stages so far end at layer e.
  std::vector<std::vector<State>> states(n + 1), next(n + 1);
  State initial{};
  for (int g = 0; g < groups; ++g) {
    initial.pi[g] = 0;
    initial.worst[g] = -kInfinity;
  }
  initial.max_backward = 0;
  states[0].push_back(initial);
  // With `plan`: per stage and end layer, where each of its states came from.
  struct Link {
    int from, parent, choice;
  };
  std::vector<std::vector<std::vector<Link>>> links;
  for (StageIdx s = 0; s < stages; ++s) {
    const int lo = s + 1 < stages ? end_lo[s] : n;
    const int hi = s + 1 < stages ? end_hi[s] : n;
    for (auto& v : next) v.clear();
    for (int start = 0; start <= n; ++start) {
      if (states[start].empty()) continue;
      for (int k = k_lo[s]; k < k_hi[s]; ++k) {
        if (poll.Expired()) return 0;
        const Candidate& c = candidates_.per_stage[s][k];
        const int end = start + c.length;
        if (start < c.start_min || start > c.start_max || end < lo || end > hi) continue;
        double pi[kMaxGroups], beta[kMaxGroups], sigma[kMaxGroups], cool[kMaxGroups];
        for (int g = 0; g < groups; ++g) {
          pi[g] = cost(groups_[g].before[s], c);
          beta[g] = cost(groups_[g].at[s], c);
          sigma[g] = cost(groups_[g].after[s], c);
          cool[g] = groups_[g].cool.empty() ? 0 : groups_[g].cool[s];  // -1: no member at s
        }
        const double backward = static_cast<double>(c.cost.backward_ns);
        for (std::size_t i = 0; i < states[start].size(); ++i) {
          const State& st = states[start][i];
          State n2;
          n2.from = start;
          n2.parent = static_cast<int>(i);
          n2.choice = k;
          for (int g = 0; g < groups; ++g) {
            n2.pi[g] = st.pi[g] + pi[g];
            n2.worst[g] = st.worst[g] + sigma[g];
            if (cool[g] >= 0) n2.worst[g] = std::max(n2.worst[g], st.pi[g] + beta[g] + cool[g] * st.max_backward);
          }
          n2.max_backward = has_cool ? std::max(st.max_backward, backward) : 0;
          next[end].push_back(n2);
        }
        if (next[end].size() >= prune_at) Prune(next[end], groups, max_states);
      }
    }
    if (plan != nullptr) links.emplace_back(n + 1);
    for (int e = 0; e <= n; ++e) {
      if (deadline.Expired()) return 0;
      Prune(next[e], groups, max_states);
      states[e].swap(next[e]);
      if (plan != nullptr) {
        for (const State& st : states[e]) links.back()[e].push_back({st.from, st.parent, st.choice});
      }
    }
  }
  double best = kInfinity;
  int best_index = -1;
  for (std::size_t i = 0; i < states[n].size(); ++i) {
    double worst = -kInfinity;
    for (int g = 0; g < groups; ++g) worst = std::max(worst, states[n][i].worst[g]);
    if (worst < best) {
      best = worst;
      best_index = static_cast<int>(i);
    }
  }
  if (plan != nullptr && best_index >= 0) {
    plan->end.assign(stages, n);
    plan->choice.assign(stages, -1);
    Link link = links[stages - 1][n][best_index];
    for (StageIdx s = stages - 1; s >= 0; --s) {
      plan->choice[s] = link.choice;
      if (s == 0) break;
      plan->end[s - 1] = link.from;
      link = links[s - 1][link.from][link.parent];
    }
  }
  return best;
}

}  // namespace bmpipe

#include "bmpipe/solve/family_bound.h"

#include <algorithm>

#include "bmpipe/sim/timing.h"
#include "bmpipe/solve/linear_model.h"

namespace bmpipe {
namespace {

constexpr double kSlowdowns[] = {1.1, 1e6};
constexpr int kGroups = 2;

// Per group: the sum of pi so far and the largest family member so far. Lower is better in all.
struct State {
  double pi[kGroups];
  double worst[kGroups];
};

bool Dominates(const State& a, const State& b) {
  for (int g = 0; g < kGroups; ++g) {
    if (a.pi[g] > b.pi[g] || a.worst[g] > b.worst[g]) return false;
  }
  return true;
}

// At most this many states per layer position: beyond, the rest are merged into one state that
// takes the least of each number, which can only lower the bound (it stays valid).
constexpr std::size_t kMaxStates = 48;

// A position's states are pruned as soon as they reach this many, so that no sort is long (the
// deadline is polled between them) and memory stays small.
constexpr std::size_t kPruneAt = std::size_t{1} << 15;

// Keeps the states no kept state is at least as good as in every number, in sorted order, up to
// kMaxStates - 1; everything after that is merged into one state taking the least of each number.
// The cost is at most kMaxStates dominance checks per state.
void Prune(std::vector<State>& states) {
  std::sort(states.begin(), states.end(), [](const State& a, const State& b) {
    for (int g = 0; g < kGroups; ++g) {
      if (a.pi[g] != b.pi[g]) return a.pi[g] < b.pi[g];
    }
    for (int g = 0; g < kGroups; ++g) {
      if (a.worst[g] != b.worst[g]) return a.worst[g] < b.worst[g];
    }
    return false;
  });
  std::vector<State> kept;
  bool merging = false;
  State merged{};
  for (const State& s : states) {
    if (merging) {
      for (int g = 0; g < kGroups; ++g) {
        merged.pi[g] = std::min(merged.pi[g], s.pi[g]);
        merged.worst[g] = std::min(merged.worst[g], s.worst[g]);
      }
      continue;
    }
    bool dominated = false;
    for (const State& k : kept) {
      if (Dominates(k, s)) {
        dominated = true;
        break;
      }
    }
    if (dominated) continue;
    if (kept.size() + 1 < kMaxStates) {
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
  // Its weights price F, B and p2p; a split backward's paths also use W.
  if (p.SplitBackward()) {
    available_ = false;
    return;
  }
  for (double slowdown : kSlowdowns) {
    Group group;
    group.before.assign(stages, {kInfinity, kInfinity, kInfinity});
    group.after.assign(stages, {kInfinity, kInfinity, kInfinity});
    group.at.resize(stages);
    for (StageIdx target = 0; target < stages; ++target) {
      if (deadline.Expired()) {
        available_ = false;
        return;
      }
      Durations<double> d;
      d.forward.assign(stages, 1);
      d.backward.assign(stages, 1);
      d.p2p_out.assign(stages, 0);
      d.rank_update.assign(p.ranks, 0);
      d.forward[target] = d.backward[target] = slowdown;
      const Timing<double> timing = TimeSchedule(schedule, d, /*record_binding=*/true);
      const PathCoefficients path = CriticalPath(schedule, d, timing, timing.last_rank);
      for (StageIdx s = 0; s < stages; ++s) {
        const Weights w{static_cast<double>(path.forward[s]), static_cast<double>(path.backward[s]),
                        s + 1 < stages ? static_cast<double>(path.hops[s]) : 0.0};
        if (s == target) {
          group.at[s] = w;
          continue;
        }
        Weights& into = s < target ? group.before[s] : group.after[s];
        into.forward = std::min(into.forward, w.forward);
        into.backward = std::min(into.backward, w.backward);
        into.p2p = std::min(into.p2p, w.p2p);
      }
    }
    // The last stage is never before s*, the first never after it.
    group.before[stages - 1] = {0, 0, 0};
    group.after[0] = {0, 0, 0};
    groups_.push_back(std::move(group));
  }
}

double FamilyBound::Bound(const std::vector<int>& end_lo, const std::vector<int>& end_hi,
                          const std::vector<int>& k_lo, const std::vector<int>& k_hi, const Deadline& deadline) const {
  if (!available_) return 0;
  DeadlinePoll poll(deadline);
  const int stages = problem_.pipeline.stages();
  const int n = problem_.num_layers();
  auto cost = [](const Weights& w, const Candidate& c) {
    return w.forward * static_cast<double>(c.cost.forward_ns) + w.backward * static_cast<double>(c.cost.backward_ns) +
           w.p2p * static_cast<double>(c.cost.p2p_out_ns);
  };
  // states[e]: the states of plans whose stages so far end at layer e.
  std::vector<std::vector<State>> states(n + 1), next(n + 1);
  State initial;
  for (int g = 0; g < kGroups; ++g) {
    initial.pi[g] = 0;
    initial.worst[g] = -kInfinity;
  }
  states[0].push_back(initial);
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
        double pi[kGroups], beta[kGroups], sigma[kGroups];
        for (int g = 0; g < kGroups; ++g) {
          pi[g] = cost(groups_[g].before[s], c);
          beta[g] = cost(groups_[g].at[s], c);
          sigma[g] = cost(groups_[g].after[s], c);
        }
        for (const State& st : states[start]) {
          State n2;
          for (int g = 0; g < kGroups; ++g) {
            n2.pi[g] = st.pi[g] + pi[g];
            n2.worst[g] = std::max(st.worst[g] + sigma[g], st.pi[g] + beta[g]);
          }
          next[end].push_back(n2);
        }
        if (next[end].size() >= kPruneAt) Prune(next[end]);
      }
    }
    for (int e = 0; e <= n; ++e) {
      if (deadline.Expired()) return 0;
      Prune(next[e]);
      states[e].swap(next[e]);
    }
  }
  double best = kInfinity;
  for (const State& st : states[n]) {
    double worst = -kInfinity;
    for (int g = 0; g < kGroups; ++g) worst = std::max(worst, st.worst[g]);
    best = std::min(best, worst);
  }
  return best;
}

}  // namespace bmpipe

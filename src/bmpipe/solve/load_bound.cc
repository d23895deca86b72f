#include "bmpipe/solve/load_bound.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace bmpipe {
namespace {

// Ops and transfers on a dependency chain, by kind.
struct Chain {
  int forwards = 0, backwards = 0, transfers = 0;
};

// A chain that must finish before `op` can start: its first dependency, that one's first, and so
// on. It stops at a W (the end of an action that runs a full backward, whose B and W it would
// price as two B's), so that it stays a lower bound.
Chain ChainBefore(const Schedule& schedule, Op op) {
  Chain chain;
  for (OpEdges deps = schedule.Dependencies(op); deps.count > 0; deps = schedule.Dependencies(op)) {
    op = schedule.OpOf(deps.edge[0].op);
    if (op.kind == OpKind::kWeightGrad) break;
    (op.kind == OpKind::kForward ? chain.forwards : chain.backwards) += 1;
    chain.transfers += deps.edge[0].crosses_ranks ? 1 : 0;
  }
  return chain;
}

// The chain that cannot start before `op` ends: the backwards of the same micro-batch on the
// stages before it, each waiting for the one after it.
Chain ChainAfter(const Schedule& schedule, Op op) {
  Chain chain;
  for (bool more = true; more;) {
    more = false;
    for (const OpEdge& e : schedule.Dependents(op)) {
      const Op next = schedule.OpOf(e.op);
      if (next.kind != OpKind::kBackward) continue;
      chain.backwards += 1;
      chain.transfers += e.crosses_ranks ? 1 : 0;
      op = next;
      more = true;
      break;
    }
  }
  return chain;
}

// The least T such that the free layers (costs sorted ascending, prefix sums `smallest`) can be
// dealt to ranks with rank r taking k_r of them, base[r] + smallest[k_r] <= T, sum k_r = free and
// k_r >= need[r].
TimeNs LeastFeasible(const std::vector<TimeNs>& base, const std::vector<int>& need,
                     const std::vector<TimeNs>& smallest) {
  const int free = static_cast<int>(smallest.size()) - 1;
  auto feasible = [&](TimeNs t) {
    long dealt = 0;
    for (std::size_t r = 0; r < base.size(); ++r) {
      if (base[r] + smallest[need[r]] > t) return false;
      const auto fits = std::upper_bound(smallest.begin(), smallest.end(), t - base[r]) - smallest.begin() - 1;
      dealt += fits;
    }
    return dealt >= free;
  };
  // Feasibility changes only at the values base[r] + smallest[k], so the least feasible integer is
  // one of them; the largest is feasible (every rank may take every free layer). Bisection over
  // the integers finds it without listing ranks x layers values.
  TimeNs lo = 0, hi = 0;
  for (TimeNs b : base) hi = std::max(hi, b + smallest.back());
  while (lo < hi) {
    const TimeNs mid = lo + (hi - lo) / 2;
    if (feasible(mid)) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return lo;
}

}  // namespace

TimeNs OptionWork(const Pipeline& pipeline, const LayerOption& o) {
  return o.forward_ns - (pipeline.overlap ? o.forward_comm_ns : 0) + o.backward_ns + o.recompute_ns -
         (pipeline.overlap ? o.backward_comm_ns : 0);
}

TimeNs RankLoadBound(const Problem& problem, const Schedule& schedule, TimeNs stage_extra_ns) {
  const Pipeline& pipeline = problem.pipeline;
  const int n = problem.num_layers();
  const TimeNs m = pipeline.micro_batches;
  TimeNs min_p2p = std::numeric_limits<TimeNs>::max();
  std::vector<TimeNs> work(n);  // m * c_l
  // Per layer: its cheapest forward and backward (+ recomputation; a split B without its W).
  std::vector<TimeNs> forwards, backwards;
  const bool split = pipeline.SplitBackward();
  double total = 0;  // sum of c_l
  for (LayerIdx l = 0; l < n; ++l) {
    const Layer& layer = problem.layers[l];
    TimeNs c = std::numeric_limits<TimeNs>::max();
    TimeNs f = c, b = c;
    for (const LayerOption& o : layer.options) {
      // An overlapped pair may hide an op's communication entirely: only its compute is certain.
      const TimeNs forward = o.forward_ns - (pipeline.overlap ? o.forward_comm_ns : 0);
      const TimeNs backward = o.backward_ns + o.recompute_ns - (pipeline.overlap ? o.backward_comm_ns : 0);
      c = std::min(c, OptionWork(pipeline, o));
      f = std::min(f, forward);
      b = std::min(b, backward - (split ? layer.weight_grad_ns : 0));
    }
    forwards.push_back(f);
    backwards.push_back(b);
    min_p2p = std::min(min_p2p, layer.p2p_ns);
    work[l] = m * c;
    total += static_cast<double>(c);
  }
  // A chain of k ops on k distinct stages covers at least k distinct layers: it is at least as
  // long as the k cheapest layers' ops.
  auto prefix_sums = [](std::vector<TimeNs> v) {
    std::sort(v.begin(), v.end());
    std::vector<TimeNs> sums(1, 0);
    for (TimeNs x : v) sums.push_back(sums.back() + x);
    return sums;
  };
  const std::vector<TimeNs> cheapest_forwards = prefix_sums(forwards), cheapest_backwards = prefix_sums(backwards);
  auto length = [&](const Chain& c) {
    return cheapest_forwards[std::min(c.forwards, n)] + cheapest_backwards[std::min(c.backwards, n)] +
           c.transfers * min_p2p;
  };
  // Ranks that run the same work: every rank, or with two copies of every stage (the mirror
  // placement) the pair r, p-1-r, which both hold stages r and p-1-r and run half the
  // micro-batches of each. A layer then costs each rank of its pair m/2 times its work.
  const bool paired = pipeline.Copies() > 1;
  const int groups = paired ? pipeline.ranks / 2 : pipeline.ranks;
  auto group_of = [&](RankIdx r) { return paired ? std::min(r, pipeline.ranks - 1 - r) : r; };
  // Layer 0 sits on stage 0 (rank 0), the last layer on the last stage.
  std::vector<LayerIdx> fixed_group(n, -1);
  fixed_group[0] = group_of(pipeline.RankOf(0));
  fixed_group[n - 1] = group_of(pipeline.RankOf(pipeline.stages() - 1));
  // Two forms: with the chain after the rank's last op, or with its update time.
  TimeNs best = 0;
  for (bool with_update : {false, true}) {
    std::vector<TimeNs> base(groups, 0), free_costs;
    std::vector<int> need(groups, pipeline.chunks);
    for (RankIdx r = 0; r < pipeline.ranks; ++r) {
      const std::vector<Op>& ops = schedule.ops_of(r);
      base[group_of(r)] = std::max(base[group_of(r)], length(ChainBefore(schedule, ops.front())) +
                                                          (with_update ? 0 : length(ChainAfter(schedule, ops.back()))));
    }
    // The stages' own extra work (stage_extra_ns), each copy running its share of the
    // micro-batches; a pair of ranks holds the same stages.
    if (stage_extra_ns > 0) {
      std::vector<int> stages_of(groups, 0);
      for (StageIdx s = 1; s + 1 < pipeline.stages(); ++s) stages_of[group_of(pipeline.RankOf(s))] += 1;
      for (int g = 0; g < groups; ++g) base[g] += stages_of[g] * (m / pipeline.Copies()) * stage_extra_ns;
    }
    for (LayerIdx l = 0; l < n; ++l) {
      const TimeNs cost = work[l] / pipeline.Copies() + (with_update ? problem.layers[l].update_ns : 0);
      if (fixed_group[l] >= 0) {
        base[fixed_group[l]] += cost;
        need[fixed_group[l]] = std::max(0, need[fixed_group[l]] - 1);
      } else {
        free_costs.push_back(cost);
      }
    }
    std::sort(free_costs.begin(), free_costs.end());
    std::vector<TimeNs> smallest(1, 0);
    for (TimeNs c : free_costs) smallest.push_back(smallest.back() + c);
    for (int& k : need) k = std::min(k, static_cast<int>(free_costs.size()));
    best = std::max(best, LeastFeasible(base, need, smallest));
  }
  // One chunk per rank: the chains around rank r run on the stages before it, which are the other
  // ranks' work. With x_s = F_s + B_s, T >= sum_{s<r} x_s + m x_r for every r; over real x >= 0
  // with sum x = W (the cheapest total work per micro-batch) the least such T makes every term
  // equal: T = W / (1 - (1 - 1/m)^p). (A split backward's chain after rank r runs only the B parts.)
  if (pipeline.chunks == 1 && pipeline.ranks > 1 && !split) {
    const double shrink = std::pow(1 - 1.0 / static_cast<double>(m), pipeline.ranks);
    best = std::max(best, static_cast<TimeNs>(std::floor(total / (1 - shrink))));
  }
  return best;
}

}  // namespace bmpipe

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
  RankIdx end_rank = -1;  // ChainAfter: the rank of its last op (-1: empty)
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
      chain.end_rank = schedule.RankOfOp(e.op);
      op = next;
      more = true;
      break;
    }
  }
  return chain;
}

// One way of bounding every rank's time: base[r] plus the free layers it is dealt, each costing
// what this form counts of it (prefix sums of the costs, ascending: any k layers cost at least the
// k cheapest). With `coupled` (one rank `end` whose update every coupled rank's bound ends with),
// a coupled rank's base also has the least update of the free layers `end` is dealt.
struct Form {
  std::vector<TimeNs> base;
  std::vector<TimeNs> smallest;
  std::vector<char> coupled;  // empty: none
  bool with_update = false;   // its costs include the layers' updates
  // When not empty, each group's own costs of k = 0, 1, ... free layers (the memory form's), at
  // least `smallest`, non-decreasing, kNoFit where k do not fit; past its end, the larger of
  // `smallest` and its last.
  std::vector<std::vector<TimeNs>> per_group;

  TimeNs Cost(int group, int k) const {
    if (per_group.empty()) return smallest[k];
    const std::vector<TimeNs>& own = per_group[group];
    return k < static_cast<int>(own.size()) ? own[k] : std::max(smallest[k], own.back());
  }
  // The most free layers group g can take within `limit` (-1: none).
  long Most(int group, TimeNs limit) const {
    auto within = [&](const std::vector<TimeNs>& costs, std::size_t from) {
      return static_cast<long>(std::upper_bound(costs.begin() + static_cast<long>(from), costs.end(), limit) -
                               costs.begin()) - 1;
    };
    if (per_group.empty()) return within(smallest, 0);
    const std::vector<TimeNs>& own = per_group[group];
    const long most = within(own, 0);
    if (most + 1 < static_cast<long>(own.size())) return most;
    return std::max(most, within(smallest, own.size()));
  }
};

// k layers that cannot fit on a rank: far beyond any plan's time, and far from overflowing.
constexpr TimeNs kNoFit = TimeNs{1} << 50;

// One layer's options as (work, bytes), work ascending; the Pareto front keeps those with fewer
// bytes than every faster one.
using Front = std::vector<std::pair<TimeNs, Bytes>>;

// The least work of `count` identical layers with options `front` (Pareto) within `bytes`, or
// kNoFit. Exact for up to three options (the count of the third enumerated, the other two in closed
// form, O(count)); beyond that, or without `exact`, the front's lower convex hull at the average
// budget per layer, which is at most the integer least.
TimeNs LeastWork(const Front& front, long count, Bytes bytes, bool exact) {
  if (count == 0) return bytes >= 0 ? 0 : kNoFit;
  // Two options a (faster, larger) and b, and how many of the count take a.
  struct Mix {
    TimeNs work;
    long faster;
  };
  auto two = [](const std::pair<TimeNs, Bytes>& a, const std::pair<TimeNs, Bytes>& b, long n, Bytes room) {
    if (room < n * b.second) return Mix{kNoFit, -1};
    const long faster = std::min<long>(n, (room - n * b.second) / (a.second - b.second));
    return Mix{faster * a.first + (n - faster) * b.first, faster};
  };
  if (front.size() == 1) return count * front[0].second <= bytes ? count * front[0].first : kNoFit;
  if (front.size() == 2) return two(front[0], front[1], count, bytes).work;
  TimeNs best = kNoFit;
  if (front.size() == 3 && exact) {
    for (long third = 0; third <= count; ++third) {
      const Mix rest = two(front[0], front[1], count - third, bytes - third * front[2].second);
      if (rest.work >= kNoFit) continue;
      best = std::min(best, rest.work + third * front[2].first);
      if (rest.faster == count - third) break;  // the rest all the fastest: more of the third only adds work
    }
    return best;
  }
  const double per = static_cast<double>(bytes) / static_cast<double>(count);
  if (per >= static_cast<double>(front[0].second)) return count * front[0].first;
  if (per < static_cast<double>(front.back().second)) return kNoFit;
  double least = static_cast<double>(front.back().first);
  for (std::size_t a = 0; a < front.size(); ++a) {
    for (std::size_t b = a + 1; b < front.size(); ++b) {
      const double ba = static_cast<double>(front[a].second), bb = static_cast<double>(front[b].second);
      if (per > ba || per < bb) continue;
      const double w = (per - bb) / (ba - bb);
      least = std::min(least, w * static_cast<double>(front[a].first) + (1 - w) * static_cast<double>(front[b].first));
    }
  }
  return static_cast<TimeNs>(std::floor(static_cast<double>(count) * least));
}

// Keeps the Pareto front of (work, bytes) pairs.
Front ParetoFront(Front all) {
  std::sort(all.begin(), all.end());
  Front front;
  for (const auto& x : all) {
    if (front.empty() || x.second < front.back().second) front.push_back(x);
  }
  return front;
}

// The least work of k = 0..free layers on one rank that fit in each of its memory rows, one row at
// a time (the largest of the rows' minima), kNoFit where they do not. Each layer is the free layers'
// least in static and held bytes, with their options' (work, saved bytes) Pareto front `options`;
// `room` is each row's capacity less what the rank's fixed layers take in it at least. Every chunk
// in `needs_layer` (its stage has no fixed layer) holds one of the k, priced in that chunk (its
// options enumerated together, up to kMaxForcedMixes mixes); the others sit in the chunk they cost
// least in. Transients are left out. With `exact`, LeastWork is exact for up to three options.
constexpr int kMaxForcedMixes = 81;
std::vector<TimeNs> LeastWorkThatFits(const std::vector<MemoryRow>& rows, const std::vector<Bytes>& room,
                                      Bytes static_bytes, Bytes weight_grad_bytes, const Front& options,
                                      const std::vector<int>& needs_layer, int free, bool exact) {
  std::vector<TimeNs> least(free + 1, 0);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const MemoryRow& row = rows[i];
    auto bytes_in = [&](int chunk, Bytes saved) {
      return static_bytes + row.ChunkBytes(chunk, saved, weight_grad_bytes, 0);
    };
    // The free layers' front in this row, each in its cheapest chunk.
    Front anywhere;
    for (const auto& [work, saved] : options) {
      Bytes bytes = std::numeric_limits<Bytes>::max();
      for (int c = 0; c < static_cast<int>(row.in_flight.size()); ++c) bytes = std::min(bytes, bytes_in(c, saved));
      anywhere.push_back({work, bytes});
    }
    anywhere = ParetoFront(std::move(anywhere));
    // The mixes of the layers the chunks in needs_layer hold, one each: (work, bytes), Pareto.
    Front forced{{0, 0}};
    double mixes = 1;
    for (std::size_t c = 0; c < needs_layer.size(); ++c) mixes *= static_cast<double>(options.size());
    const int forced_count = mixes <= kMaxForcedMixes ? static_cast<int>(needs_layer.size()) : 0;
    for (int f = 0; f < forced_count; ++f) {
      Front next;
      for (const auto& [w, b] : forced) {
        for (const auto& [work, saved] : options) next.push_back({w + work, b + bytes_in(needs_layer[f], saved)});
      }
      forced = ParetoFront(std::move(next));
    }
    for (int k = 1; k <= free; ++k) {
      TimeNs best = kNoFit;
      if (k < forced_count) {
        best = LeastWork(anywhere, k, room[i], exact);
      } else {
        for (const auto& [w, b] : forced) {
          const TimeNs rest = LeastWork(anywhere, k - forced_count, room[i] - b, exact);
          if (rest < kNoFit) best = std::min(best, w + rest);
        }
      }
      least[k] = std::max(least[k], best);
    }
  }
  // Fewer layers never need more work (drop one: less work, fewer bytes): keep it non-decreasing.
  for (int k = 1; k <= free; ++k) least[k] = std::max(least[k], least[k - 1]);
  return least;
}

// The least T such that the free layers can be dealt to ranks, rank r taking k_r >= need[r] of
// them and sum k_r = free, with base[r] + smallest[k_r] <= T in every form. `end` and
// `update_smallest` (prefix sums of the free layers' updates, ascending) are the coupling's.
TimeNs LeastFeasible(const std::vector<Form>& forms, const std::vector<int>& need, int end,
                     const std::vector<TimeNs>& update_smallest) {
  const int free = static_cast<int>(forms.front().smallest.size()) - 1;
  const int ranks = static_cast<int>(need.size());
  // The most free layers rank r can take at T, its end rank taking k; -1 when not even need[r].
  auto room = [&](int r, TimeNs t, int k) {
    long most = free;
    for (const Form& f : forms) {
      const TimeNs base = f.base[r] + (!f.coupled.empty() && f.coupled[r] ? update_smallest[k] : 0);
      if (base + f.Cost(r, need[r]) > t) return -1L;
      most = std::min(most, f.Most(r, t - base));
    }
    return most;
  };
  auto feasible = [&](TimeNs t) {
    if (end < 0) {
      long dealt = 0;
      for (int r = 0; r < ranks; ++r) {
        const long most = room(r, t, 0);
        if (most < 0) return false;
        dealt += most;
      }
      return dealt >= free;
    }
    // The fewest layers rank `end` can take so that the others take the rest: the least fixed
    // point of k = max(need, free - (what the others can take with end's update at k)), reached
    // from below (the others' room only shrinks as k grows). If it does not settle within the
    // rounds, T counts as feasible (the bound stays valid).
    int k = need[end];
    for (int round = 0; round < 64; ++round) {
      if (k > free || room(end, t, k) < k) return false;
      long others = 0;
      for (int r = 0; r < ranks; ++r) {
        if (r == end) continue;
        const long most = room(r, t, k);
        if (most < 0) return false;
        others += most;
      }
      const int required = static_cast<int>(std::max<long>(need[end], free - others));
      if (required <= k) return true;
      k = required;
    }
    return true;
  };
  // Feasibility changes only at the values base[r] + smallest[k] (+ an update sum), so the least
  // feasible integer is one of them; the largest is feasible (every rank may take every free
  // layer). Bisection over the integers finds it without listing ranks x layers values.
  TimeNs lo = 0, hi = 0;
  for (const Form& f : forms) {
    for (std::size_t r = 0; r < f.base.size(); ++r) {
      hi = std::max(hi, f.base[r] + f.Cost(static_cast<int>(r), free) + (f.coupled.empty() ? 0 : update_smallest.back()));
    }
  }
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

TimeNs RankLoadBound(const Problem& problem, const Schedule& schedule, TimeNs stage_extra_ns,
                     const std::vector<std::vector<MemoryRow>>* memory_rows) {
  const Pipeline& pipeline = problem.pipeline;
  const int n = problem.num_layers();
  const TimeNs m = pipeline.micro_batches;
  TimeNs min_p2p = std::numeric_limits<TimeNs>::max();
  // What each layer adds to its rank's busy time, m times, by kind: its compute (c_l) and, with
  // overlapped pairs (docs/semantics.md, "Actions"), also its communication, its whole backward
  // and its whole forward. A pair (forward of a, backward of b) lasts
  // max(F_a - Mf_a, Mb_b) + max(B_b - Mb_b, Mf_a), at least Mf_a + Mb_b, at least B_b and at least
  // F_a, and an op alone lasts its whole time: a rank's busy time is at least the sum of each kind
  // over its ops (the compute kind alone counted every communication hidden).
  enum Kind { kCompute, kComm, kBackward, kForward, kKinds };
  const int kinds = pipeline.overlap ? kKinds : 1;
  std::vector<std::vector<TimeNs>> works(kinds, std::vector<TimeNs>(n));  // per kind, per layer
  // Per layer: its cheapest forward and backward (+ recomputation; a split B without its W).
  std::vector<TimeNs> forwards, backwards;
  const bool split = pipeline.SplitBackward();
  double total = 0;  // sum of c_l
  for (LayerIdx l = 0; l < n; ++l) {
    const Layer& layer = problem.layers[l];
    TimeNs c = std::numeric_limits<TimeNs>::max();
    TimeNs f = c, b = c, comm = c, whole_backward = c, whole_forward = c;
    for (const LayerOption& o : layer.options) {
      comm = std::min(comm, o.forward_comm_ns + o.backward_comm_ns);
      whole_backward = std::min(whole_backward, o.backward_ns + o.recompute_ns);
      whole_forward = std::min(whole_forward, o.forward_ns);
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
    const TimeNs each[kKinds] = {c, comm, whole_backward, whole_forward};
    for (int k = 0; k < kinds; ++k) works[k][l] = m * each[k];
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
  // The chains before each rank's first op and after its last, once.
  std::vector<TimeNs> before(pipeline.ranks), after(pipeline.ranks);
  std::vector<RankIdx> after_end(pipeline.ranks);
  for (RankIdx r = 0; r < pipeline.ranks; ++r) {
    const std::vector<Op>& ops = schedule.ops_of(r);
    before[r] = length(ChainBefore(schedule, ops.front()));
    const Chain chain = ChainAfter(schedule, ops.back());
    after[r] = length(chain);
    after_end[r] = chain.end_rank;
  }
  // The free layers' updates, ascending (prefix sums), and each rank's fixed layers' updates.
  std::vector<TimeNs> free_updates, fixed_update(groups, 0);
  for (LayerIdx l = 0; l < n; ++l) {
    if (fixed_group[l] >= 0) {
      fixed_update[fixed_group[l]] += problem.layers[l].update_ns;
    } else {
      free_updates.push_back(problem.layers[l].update_ns);
    }
  }
  const std::vector<TimeNs> update_smallest = prefix_sums(free_updates);
  // Three forms: with the chain after the rank's last op, with its update time, or with the chain
  // after its last op and then the update of the rank that chain ends on (which starts after that
  // rank's last op, so after any of its ops: under 1F1B, rank 0's optimizer step after the last
  // micro-batch's backward has come down the pipeline). That update is at least the rank's fixed
  // layers' and the least of as many free layers as it is dealt: where every chain ends on one
  // rank (1F1B, interleaved) the deal couples them; otherwise each stage holds at least one layer.
  // The forms bound every rank at once: a deal must satisfy all three (any k layers cost at least
  // the k cheapest by each form's costs).
  enum class Tail { kChain, kUpdate, kChainThenUpdate };
  std::vector<int> need(groups, pipeline.chunks);
  for (LayerIdx l = 0; l < n; ++l) {
    if (fixed_group[l] >= 0) need[fixed_group[l]] = std::max(0, need[fixed_group[l]] - 1);
  }
  for (int& k : need) k = std::min(k, static_cast<int>(free_updates.size()));
  // Where every chain after a rank's last op ends on one rank (1F1B, interleaved: rank 0), the
  // update there grows with the layers that rank is dealt.
  RankIdx end = -1;
  bool one_end = !paired;
  for (RankIdx r = 0; r < pipeline.ranks && one_end; ++r) {
    if (after_end[r] < 0) continue;
    if (end >= 0 && after_end[r] != end) one_end = false;
    end = after_end[r];
  }
  if (!one_end) end = -1;
  std::vector<Form> forms;
  for (int k = 0; k < kinds; ++k) {
    const std::vector<TimeNs>& work = works[k];
    for (Tail tail : {Tail::kChain, Tail::kUpdate, Tail::kChainThenUpdate}) {
      const bool with_update = tail == Tail::kUpdate;
      Form form;
      form.with_update = with_update;
      form.base.assign(groups, 0);
      if (tail == Tail::kChainThenUpdate && end >= 0) form.coupled.assign(groups, 0);
      for (RankIdx r = 0; r < pipeline.ranks; ++r) {
        TimeNs tail_ns = 0;
        if (!with_update) {
          tail_ns = after[r];
          if (tail == Tail::kChainThenUpdate && after_end[r] >= 0) {
            const int e = group_of(after_end[r]);
            tail_ns += fixed_update[e];
            if (end >= 0) {
              form.coupled[group_of(r)] = 1;
            } else {
              tail_ns += update_smallest[need[e]];
            }
          }
        }
        form.base[group_of(r)] = std::max(form.base[group_of(r)], before[r] + tail_ns);
      }
      // The stages' own extra work (stage_extra_ns: recomputation), each copy running its share of
      // the micro-batches; a pair of ranks holds the same stages.
      if (stage_extra_ns > 0 && (k == kCompute || k == kBackward)) {
        std::vector<int> stages_of(groups, 0);
        for (StageIdx s = 1; s + 1 < pipeline.stages(); ++s) stages_of[group_of(pipeline.RankOf(s))] += 1;
        for (int g = 0; g < groups; ++g) form.base[g] += stages_of[g] * (m / pipeline.Copies()) * stage_extra_ns;
      }
      std::vector<TimeNs> free_costs;
      for (LayerIdx l = 0; l < n; ++l) {
        const TimeNs cost = work[l] / pipeline.Copies() + (with_update ? problem.layers[l].update_ns : 0);
        if (fixed_group[l] >= 0) {
          form.base[fixed_group[l]] += cost;
        } else {
          free_costs.push_back(cost);
        }
      }
      form.smallest = prefix_sums(free_costs);
      forms.push_back(std::move(form));
    }
  }
  // The memory form: each rank's least work of k free layers that fit in its rows, in every tail.
  const int free = static_cast<int>(free_updates.size());
  if (memory_rows != nullptr && !paired && !pipeline.overlap && free > 0 &&
      static_cast<int>(memory_rows->size()) == pipeline.ranks) {
    // One free layer no larger than any: the least static and held bytes, every option of every
    // free layer (its work and saved bytes; the Pareto front).
    Bytes static_least = std::numeric_limits<Bytes>::max(), held_least = static_least;
    Front all;
    for (LayerIdx l = 0; l < n; ++l) {
      if (fixed_group[l] >= 0) continue;
      static_least = std::min(static_least, problem.layers[l].static_bytes);
      held_least = std::min(held_least, problem.layers[l].weight_grad_bytes);
      for (const LayerOption& o : problem.layers[l].options) all.push_back({OptionWork(pipeline, o), o.saved_bytes});
    }
    const Front options = ParetoFront(std::move(all));
    // Up to a few times a rank's even share (past it, the other forms' costs and the last value:
    // a bound still, and O(ranks x share) to hold).
    const int most = std::min(free, 4 * ((free + groups - 1) / groups) + pipeline.chunks + 8);
    long rows = 0;
    for (const std::vector<MemoryRow>& r : *memory_rows) rows += static_cast<long>(r.size());
    const double mixes = std::min<double>(kMaxForcedMixes, std::pow(static_cast<double>(options.size()), pipeline.chunks));
    const bool exact = static_cast<double>(rows) * most * most * mixes <= 5e7;
    std::vector<std::vector<TimeNs>> fits(groups);
    for (RankIdx r = 0; r < pipeline.ranks; ++r) {
      const std::vector<MemoryRow>& rank_rows = (*memory_rows)[r];
      // What the fixed layers on r take at least in each row: their own chunk, their least saved bytes.
      std::vector<Bytes> room(rank_rows.size(), problem.memory_bytes - problem.reserved_bytes);
      for (LayerIdx l : {LayerIdx{0}, static_cast<LayerIdx>(n - 1)}) {
        if (fixed_group[l] != r || (l == n - 1 && n == 1)) continue;
        const int chunk = pipeline.ChunkOf(l == 0 ? 0 : pipeline.stages() - 1);
        Bytes saved = std::numeric_limits<Bytes>::max();
        for (const LayerOption& o : problem.layers[l].options) saved = std::min(saved, o.saved_bytes);
        for (std::size_t i = 0; i < rank_rows.size(); ++i) {
          room[i] -= problem.layers[l].static_bytes +
                     rank_rows[i].ChunkBytes(chunk, saved, problem.layers[l].weight_grad_bytes, 0);
        }
      }
      // The chunks of r whose stage holds no fixed layer: each holds a free one.
      std::vector<int> needs_layer;
      for (int c = 0; c < pipeline.chunks; ++c) {
        const StageIdx stage = pipeline.StageAt(r, c);
        if (stage != 0 && stage != pipeline.stages() - 1) needs_layer.push_back(c);
      }
      const std::vector<TimeNs> least =
          LeastWorkThatFits(rank_rows, room, static_least, held_least, options, needs_layer, most, exact);
      fits[r].resize(most + 1);
      for (int k = 0; k <= most; ++k) {
        fits[r][k] = least[k] >= kNoFit || least[k] > kNoFit / m ? kNoFit : m * least[k];
      }
    }
    for (Form& form : forms) {
      form.per_group.assign(groups, std::vector<TimeNs>(form.smallest.begin(), form.smallest.begin() + most + 1));
      for (int g = 0; g < groups; ++g) {
        for (int k = 0; k <= most; ++k) {
          const TimeNs memory = fits[g][k] >= kNoFit ? kNoFit : fits[g][k] + (form.with_update ? update_smallest[k] : 0);
          form.per_group[g][k] = std::max(form.per_group[g][k], memory);
        }
      }
    }
  }
  TimeNs best = LeastFeasible(forms, need, end >= 0 ? group_of(end) : -1, update_smallest);
  if (best >= kNoFit / 2) {
    // No deal fits in memory: no plan does. Say so no louder than the other forms.
    for (Form& form : forms) form.per_group.clear();
    best = LeastFeasible(forms, need, end >= 0 ? group_of(end) : -1, update_smallest);
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

// Longest-path timing of a schedule (docs/semantics.md), generic over the time type: integer
// nanoseconds for the simulator, double for the planner, which times fractional LP durations
// to find the path whose constraint its relaxation violates most.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "bmpipe/schedule/schedule.h"

namespace bmpipe {

template <typename Time>
struct Durations {
  std::vector<Time> forward;      // per stage, per micro-batch
  std::vector<Time> backward;     // per stage, includes recomputation (and W)
  std::vector<Time> weight_grad;  // per stage, the part of backward that W runs when the schedule splits it
  std::vector<Time> p2p_out;      // per stage: p2p time of its output (and of that output's gradient)
  std::vector<Time> rank_update;  // per rank: once-per-iteration work after its last op
  // Per stage, when the pipeline overlaps its pairs (Pipeline::overlap): the communication in
  // forward and in backward (outside weight_grad) an overlapped pair hides (StageCost).
  std::vector<Time> forward_comm;
  std::vector<Time> backward_comm;
};

// When one op runs: [start_ns, end_ns) in the time type's nanoseconds.
template <typename Time>
struct OpSpan {
  Time start_ns;
  Time end_ns;
};

template <typename Time>
struct Timing {
  std::vector<std::vector<OpSpan<Time>>> span;  // per rank, per position in its op order
  // Per op: the dependency (index into its dependency list) whose end (plus p2p) set its start,
  // or -1 when the previous op on its rank or time 0 did. Filled only when requested.
  std::vector<std::vector<std::int8_t>> bound_by;
  Time iteration = 0;  // max over ranks of (end of last op + update)
  RankIdx last_rank = 0;  // the rank that ends the iteration (lowest index on ties)
  // When the order deadlocks: the first rank that could not finish and its stuck position.
  bool complete = true;
  RankIdx stuck_rank = -1;
  std::size_t stuck_position = 0;
};

// An op's duration: B runs backward - weight_grad when the schedule splits the backward.
template <typename Time>
Time DurationOf(const Durations<Time>& d, const Op& op, bool split_backward) {
  switch (op.kind) {
    case OpKind::kForward:
      return d.forward[op.stage];
    case OpKind::kBackward:
      return split_backward ? d.backward[op.stage] - d.weight_grad[op.stage] : d.backward[op.stage];
    case OpKind::kWeightGrad:
      return d.weight_grad[op.stage];
  }
  return Time(0);
}

// The ops' durations in one action (docs/semantics.md, "Actions"): at most three ops, a forward,
// a backward and its W. An overlapped pair (the pipeline overlaps, and the action is a forward
// joined by a backward of another micro-batch, with or without that backward's W) runs in two
// phases: the forward's compute beside the backward's communication, then the backward's compute
// (with its W when joined) beside the forward's communication, each as long as the longer of the
// two. The forward's duration is the first phase, the backward's the second less the W.
template <typename Time>
struct ActionTimes {
  Time op[3] = {Time(0), Time(0), Time(0)};
  bool pair = false;             // an overlapped pair
  bool forward_by_comm = false;  // the first phase is the backward's communication
  bool backward_by_comm = false;  // the second phase is the forward's communication
  bool weight_joined = false;    // the pair's backward has its W in the action
};
// Whether the action at [first, last] of an order is an overlapped pair: 0 no, 1 a forward and a
// backward, 2 with the backward's W.
inline int PairKind(const std::vector<Op>& ops, std::size_t first, std::size_t last, bool overlap) {
  if (!overlap || last == first || ops[first].kind != OpKind::kForward || ops[first + 1].kind != OpKind::kBackward ||
      ops[first].micro_batch == ops[first + 1].micro_batch) {
    return 0;
  }
  const Op& b = ops[first + 1];
  return last >= first + 2 && ops[first + 2].kind == OpKind::kWeightGrad && ops[first + 2].stage == b.stage &&
                 ops[first + 2].micro_batch == b.micro_batch
             ? 2
             : 1;
}
// The first and last positions of the action holding position i.
inline std::pair<std::size_t, std::size_t> ActionAround(const std::vector<Op>& ops, std::size_t i) {
  std::size_t first = i, last = i;
  while (first > 0 && ops[first].joined) --first;
  while (last + 1 < ops.size() && ops[last + 1].joined) ++last;
  return {first, last};
}
template <typename Time>
ActionTimes<Time> TimeAction(const Durations<Time>& d, const std::vector<Op>& ops, std::size_t first, std::size_t last,
                             bool split_backward, bool overlap) {
  ActionTimes<Time> a;
  for (std::size_t k = first; k <= last && k - first < 3; ++k) a.op[k - first] = DurationOf(d, ops[k], split_backward);
  const int kind = PairKind(ops, first, last, overlap);
  if (kind == 0) return a;
  const Op& f = ops[first];
  const Op& b = ops[first + 1];
  a.pair = true;
  a.weight_joined = kind == 2;
  const Time mf = d.forward_comm[f.stage], mb = d.backward_comm[b.stage];
  const Time cf = d.forward[f.stage] - mf;
  const Time cb = a.op[1] - mb;
  const Time w = a.weight_joined ? d.weight_grad[b.stage] : Time(0);
  a.forward_by_comm = mb > cf;
  a.op[0] = a.forward_by_comm ? mb : cf;
  a.backward_by_comm = mf > cb + w;
  a.op[1] = (a.backward_by_comm ? mf : cb + w) - w;
  return a;
}

// Times every op as early as its rank and its dependencies allow. Each rank advances until its
// next op (or action: the ops joined to it, timed as one) waits for one not yet timed, and resumes
// when the last op it waits for is timed: every op is visited once, its dependencies derived
// from the op itself (no per-op tables are read but the end times).
template <typename Time>
Timing<Time> TimeSchedule(const Schedule& schedule, const Durations<Time>& durations, bool record_binding);

// How often a path uses each cost: the coefficients of the path's length as a linear function
// of the stage durations.
struct PathCoefficients {
  std::vector<int> forward;      // per stage: forward ops on the path
  std::vector<int> backward;     // per stage: backward ops (B) on the path
  std::vector<int> weight_grad;  // per stage: W ops on the path, minus the B ops when the backward is split
  std::vector<int> hops;      // per boundary s (between stage s and s+1): p2p transfers on the path
  // Per stage, with overlapped pairs: how often the path counts each stage's forward and backward
  // communication (a pair's phase set by the partner's communication adds it; one set by its own
  // compute subtracts it from the op's forward or backward). Empty without overlap.
  std::vector<int> forward_comm;
  std::vector<int> backward_comm;
  RankIdx update_rank = -1;   // the rank whose update time ends the path, if it has one
};

// The longest path to the end of rank `end_rank` (its last op plus its update) of a timing made
// with record_binding, following back whichever of (previous op on the rank, a dependency) set
// each start. A split B of stage s counts as backward[s] - weight_grad[s]. With end_rank = timing.last_rank it is the critical path of the iteration.
template <typename Time>
PathCoefficients CriticalPath(const Schedule& schedule, const Durations<Time>& durations, const Timing<Time>& timing,
                              RankIdx end_rank);

// Length of a path under the given durations.
template <typename Time>
Time PathLength(const PathCoefficients& path, const Durations<Time>& durations);

}  // namespace bmpipe

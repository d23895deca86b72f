// Longest-path timing of a schedule (docs/semantics.md), generic over the time type: integer
// nanoseconds for the simulator, double for the planner, which times fractional LP durations
// to find the path whose constraint its relaxation violates most.
#pragma once

#include <cstdint>
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

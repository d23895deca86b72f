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
  std::vector<Time> backward;     // per stage, includes recomputation
  std::vector<Time> p2p_out;      // per stage: p2p time of its output (and of that output's gradient)
  std::vector<Time> rank_update;  // per rank: once-per-iteration work after its last op
};

template <typename Time>
struct Timing {
  std::vector<std::vector<Time>> start;  // per rank, per position in its op order
  std::vector<std::vector<Time>> end;
  // Per op: true when its start was set by its dependency (plus p2p), false when by the previous
  // op on its rank or time 0. Filled only when requested.
  std::vector<std::vector<bool>> bound_by_dependency;
  Time iteration = 0;  // max over ranks of (end of last op + update)
  RankIdx last_rank = 0;  // the rank that ends the iteration (lowest index on ties)
  // When the order deadlocks: the first rank that could not finish and its stuck position.
  bool complete = true;
  RankIdx stuck_rank = -1;
  std::size_t stuck_position = 0;
};

// Times every op as early as its rank and its dependency allow. Each rank advances until its
// next op waits for one not yet timed, and resumes when that op is timed: every op is visited
// once.
template <typename Time>
Timing<Time> TimeSchedule(const Schedule& schedule, const Durations<Time>& durations, bool record_binding);

// How often a path uses each cost: the coefficients of the path's length as a linear function
// of the stage durations.
struct PathCoefficients {
  std::vector<int> forward;   // per stage: forward ops on the path
  std::vector<int> backward;  // per stage: backward ops on the path
  std::vector<int> hops;      // per boundary s (between stage s and s+1): p2p transfers on the path
  RankIdx update_rank = -1;   // the rank whose update time ends the path, if it has one
};

// The longest path to the end of rank `end_rank` (its last op plus its update) of a timing made
// with record_binding, following back whichever of (previous op on the rank, dependency) set each
// start. With end_rank = timing.last_rank it is the critical path of the iteration.
template <typename Time>
PathCoefficients CriticalPath(const Schedule& schedule, const Durations<Time>& durations, const Timing<Time>& timing,
                              RankIdx end_rank);

// Length of a path under the given durations.
template <typename Time>
Time PathLength(const PathCoefficients& path, const Durations<Time>& durations);

}  // namespace bmpipe

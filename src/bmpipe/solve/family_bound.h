// A lower bound on the iteration time that is exact over the integers for a family of paths, for
// branch and bound to use beside its linear relaxation.
//
// The family's members are critical paths of the schedule under durations that make one stage s*
// (and, in the last group, one earlier stage c) stand out, found by timing such durations. Up to four
// groups, each with one member per s*:
//  - s* 1.1 times as slow in forward and backward: for 1F1B the critical path of plans with a mild
//    bottleneck at s* (stages before s* once, s* m - w_s* + 1 times, stages after twice);
//  - s* 10^6 times as slow: all of rank s*'s ops;
//  - with one chunk per rank, s* backward-heavy (forward 0.01, backward 3.5 against 1 and 2): its
//    steady state, then its own cool-down (for 1F1B: backward m times);
//  - with one chunk per rank, the cool-down group: s* the steady state's bottleneck and an earlier
//    stage c with the slowest backward, so that the backwards left when s*'s steady state ends
//    queue at c (for 1F1B: c's backward w_s* times). With early stages recomputing to fit their
//    in-flight activations, this is the optimum's critical path on long pipelines.
// The members of a group are lowered to three coefficient classes per stage i: before s* (pi_i, the
// least over the s* > i), at s* (beta_i), after s* (sigma_i, the least over the s* < i); in the
// cool-down group c's backward is priced apart, as cool[s*] times the largest backward before s*,
// where cool[s*] is the least excess of c's backward coefficient over its before class over the
// c < s*. Lowering coefficients keeps every member a lower bound on a real path, hence on the
// iteration time.
//
// The bound, min over plans of max over members, is computed exactly by a dynamic program over
// stages whose state holds, per group, the sum of pi so far and the largest member so far (with
// the sigma of later stages added as they come), and the largest backward so far; dominated
// states are dropped, and beyond 48 states per position the rest are merged into their
// componentwise minimum (a relaxation). Plans are restricted to a branch-and-bound node's box of
// boundaries and candidates. The cool-down group times the schedule once per pair of stages: it
// is left out beyond 4e7 op timings. The program can also return the plan of its minimum, which
// on long 1F1B pipelines is often the optimum (branch and bound tries it).
#pragma once

#include <vector>

#include "bmpipe/core/deadline.h"
#include "bmpipe/schedule/schedule.h"
#include "bmpipe/solve/candidates.h"
#include "bmpipe/solve/local_search.h"

namespace bmpipe {

class FamilyBound {
 public:
  static constexpr int kMaxGroups = 4;
  // At most this many states per layer position by default: beyond, the rest are merged into one
  // state that takes the least of each number, which can only lower the bound (it stays valid).
  static constexpr std::size_t kMaxStates = 48;

  // Times the schedule three times per stage and once per pair of stages (the cool-down group,
  // left out when that is too much); when `deadline` passes first, the groups not yet complete are
  // left out (with none, the bound is 0: no information).
  FamilyBound(const Problem& problem, const Candidates& candidates, const Schedule& schedule,
              const Deadline& deadline = Deadline::Never());

  // The least possible largest family member, in nanoseconds, over plans whose stage s ends in
  // [end_lo[s], end_hi[s]] (s = 0..S-2) and uses a candidate index in [k_lo[s], k_hi[s]).
  // Infinity when no such plan exists; 0 (a valid bound) when `deadline` passes first.
  // With `plan`: a plan of that least largest member (or, where states were merged, of one of the
  // merged states: a real plan near it), for branch and bound to try. `max_states`: the cap per
  // layer position.
  double Bound(const std::vector<int>& end_lo, const std::vector<int>& end_hi, const std::vector<int>& k_lo,
               const std::vector<int>& k_hi, const Deadline& deadline = Deadline::Never(),
               CandidatePlan* plan = nullptr, std::size_t max_states = kMaxStates) const;

 private:
  struct Weights {
    double forward = 0, backward = 0, p2p = 0;
  };
  // Per weight group, per stage: the three coefficient classes.
  struct Group {
    std::vector<Weights> before, at, after;
    // The cool-down group only: per stage a*, the coefficient of the largest backward before it
    // (-1: no member at a*).
    std::vector<double> cool;
  };
  const Problem& problem_;
  const Candidates& candidates_;
  std::vector<Group> groups_;
  bool available_ = true;
};

}  // namespace bmpipe

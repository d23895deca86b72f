// A lower bound on the iteration time that is exact over the integers for a family of paths, for
// branch and bound to use beside its linear relaxation.
//
// The family has, for every stage s* and every weight w in {1.1, 10^6}, one path of the
// schedule: the critical path when stage s* takes w times as long as every other stage (found by
// timing such durations). For 1F1B with w = 1.1 it is the critical path of plans with a mild
// bottleneck at s* (stages before s* once, s* m - w_s* times, stages after twice); with w = 10^6
// it runs all of rank s* (s* m times, stages before once). The paths of one weight are lowered
// to three coefficient classes per stage i: before s* (pi_i, the least over the s* > i), at s*
// (beta_i), after s* (sigma_i, the least over the s* < i). Lowering coefficients keeps every
// member a lower bound on a real path, hence on the iteration time.
//
// The bound, min over plans of max over members, is computed exactly by a dynamic program over
// stages whose state holds, per weight, the sum of pi so far and the largest member so far (with
// the sigma of later stages added as they come); dominated states are dropped, and beyond 48
// states per position the rest are merged into their componentwise minimum (a relaxation). Plans are
// restricted to a branch-and-bound node's box of boundaries and candidates.
#pragma once

#include <vector>

#include "bmpipe/core/deadline.h"
#include "bmpipe/schedule/schedule.h"
#include "bmpipe/solve/candidates.h"

namespace bmpipe {

class FamilyBound {
 public:
  // Times the schedule twice per stage; when `deadline` passes first, the bound is 0 (no
  // information) from then on.
  FamilyBound(const Problem& problem, const Candidates& candidates, const Schedule& schedule,
              const Deadline& deadline = Deadline::Never());

  // The least possible largest family member, in nanoseconds, over plans whose stage s ends in
  // [end_lo[s], end_hi[s]] (s = 0..S-2) and uses a candidate index in [k_lo[s], k_hi[s]).
  // Infinity when no such plan exists; 0 (a valid bound) when `deadline` passes first.
  double Bound(const std::vector<int>& end_lo, const std::vector<int>& end_hi, const std::vector<int>& k_lo,
               const std::vector<int>& k_hi, const Deadline& deadline = Deadline::Never()) const;

 private:
  struct Weights {
    double forward = 0, backward = 0, p2p = 0;
  };
  // Per weight group, per stage: the three coefficient classes.
  struct Group {
    std::vector<Weights> before, at, after;
  };
  const Problem& problem_;
  const Candidates& candidates_;
  std::vector<Group> groups_;
  bool available_ = true;
};

}  // namespace bmpipe

// Incumbents for the planner: plans built from candidates and improved by moves judged by the
// exact simulator. Not a proof of anything; branch and bound supplies the bound.
#pragma once

#include <optional>
#include <vector>

#include "bmpipe/core/deadline.h"
#include "bmpipe/schedule/schedule.h"
#include "bmpipe/sim/timing.h"
#include "bmpipe/solve/candidates.h"

namespace bmpipe {

// A plan in candidate form: stage s covers [end[s-1], end[s]) with candidate choice[s].
struct CandidatePlan {
  std::vector<int> end;     // per stage; end[S-1] = N
  std::vector<int> choice;  // per stage: index into candidates.per_stage[s]
};

class PlanBuilder {
 public:
  // `schedule` is the problem's (Schedule(problem.pipeline)); it must outlive the builder.
  PlanBuilder(const Problem& problem, const Candidates& candidates, const Schedule& schedule);

  // Candidates of stage s that can cover [start, start + length), in candidate order.
  std::vector<int> Compatible(StageIdx s, LayerIdx start, int length) const;
  // Whether every rank fits in memory (exact from the memory rows).
  bool Fits(const CandidatePlan& plan) const;
  Plan ToPlan(const CandidatePlan& plan) const;
  // For the given boundaries: per stage `preferred[s]` if given and compatible, else the
  // compatible candidate with the least F + B; then, while a rank is over capacity, its stages
  // step to candidates that save memory at the least time. Empty when no assignment is found.
  // With allow_over, a plan that stays over capacity is returned rather than nothing.
  std::optional<CandidatePlan> Complete(const std::vector<int>& end, const std::vector<int>* preferred = nullptr,
                                        bool allow_over = false) const;

  // Bytes over capacity summed over ranks, then the simulated iteration time (compared in that
  // order: local search first makes a plan fit, then makes it fast).
  struct Score {
    Bytes excess = 0;
    TimeNs iteration_ns = 0;
    bool operator<(const Score& o) const {
      return excess != o.excess ? excess < o.excess : iteration_ns < o.iteration_ns;
    }
  };
  Score Evaluate(const CandidatePlan& plan) const;
  // The plan's score when it is better than `incumbent`, else nothing. Equal to Evaluate's
  // comparison, but a plan that cannot be better is not simulated: over capacity while the
  // incumbent fits, or a time floor (TimeFloor) no less than the incumbent's time.
  std::optional<Score> EvaluateIfBetter(const CandidatePlan& plan, const Score& incumbent) const;
  // A lower bound on the plan's simulated iteration time, in O(stages + ranks): per rank, its ops
  // up to its first backward, which cannot start before the forward chain to it (through the
  // stages before its first op) and their durations, nor before its micro-batch's forward through
  // every stage and backward back to it; then the durations of the rest of its ops, and the
  // longer of its update and the backward chain after its last op (docs/semantics.md; with the
  // p2p time of every step of a chain that crosses ranks). Zero when the pipeline overlaps its
  // pairs (an action may be shorter than its ops).
  TimeNs TimeFloor(const CandidatePlan& plan) const;

  const Problem& problem() const { return problem_; }
  const Candidates& candidates() const { return candidates_; }

 private:
  Bytes Excess(const CandidatePlan& plan) const;  // bytes over capacity, summed over ranks
  Durations<TimeNs> DurationsOf(const CandidatePlan& plan) const;
  // Evaluate and TimeFloor of the plan whose durations are `d` (DurationsOf), built once.
  Score Evaluate(const CandidatePlan& plan, const Durations<TimeNs>& d) const;
  TimeNs TimeFloor(const Durations<TimeNs>& d) const;

  const Problem& problem_;
  const Candidates& candidates_;
  const Schedule& schedule_;  // Evaluate times many plans of the same pipeline
  // What TimeFloor needs of each rank's op order: how many ops of each kind it runs per stage
  // before its first backward and from it on, the stage of its first op (when a forward), of its
  // first backward, and of its last op (when a backward).
  struct StageOps {
    StageIdx stage;
    int forwards = 0, backwards = 0, weight_grads = 0;
  };
  struct RankOps {
    std::vector<StageOps> warm_up, rest;
    StageIdx first_forward = -1;   // the stage of the rank's first op, when it is a forward
    StageIdx first_backward = -1;  // the stage of its first backward (none: -1)
    StageIdx last_backward = -1;   // the stage of its last op, when it is a backward
  };
  std::vector<RankOps> rank_ops_;
  // Per stage s: whether stages s and s + 1 lie on different ranks in every copy.
  std::vector<bool> crosses_;
};

// Hill climbing from `start`: move one layer from any stage to any other (the boundaries between
// them shift by one, the stages' candidates are re-chosen), or give one stage another candidate
// for the same block; take every move that
// shortens the simulated iteration, until none does (a local optimum: deterministic) or
// `deadline` passes (checked before every move).
CandidatePlan ImproveLocally(const PlanBuilder& builder, CandidatePlan start, const Deadline& deadline);

}  // namespace bmpipe

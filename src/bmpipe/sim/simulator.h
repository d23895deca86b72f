// Exact simulation of a schedule (docs/semantics.md): every op starts as soon as its rank is free and
// its dependency has ended (plus the p2p time when the two stages sit on different ranks); time
// is in integer nanoseconds, so the result is exact and deterministic.
#pragma once

#include <vector>

#include "bmpipe/core/error.h"
#include "bmpipe/problem/plan.h"
#include "bmpipe/problem/problem.h"
#include "bmpipe/schedule/schedule.h"
#include "bmpipe/sim/timing.h"

namespace bmpipe {

using OpTiming = OpSpan<TimeNs>;

// Rank memory is a step function; each point gives the level from `time_ns` on.
struct MemoryPoint {
  TimeNs time_ns;
  Bytes bytes;
};

// Communication an overlapped pair runs beside its partner's compute (docs/semantics.md,
// "Actions"): the backward's during the pair's first phase, the forward's during its second.
struct CommSpan {
  TimeNs start_ns = 0, end_ns = 0;
  Op op;                 // the op whose communication it is
  TimeNs hidden_ns = 0;  // the part under the partner's compute (the rest sets the phase's length)
};

struct RankResult {
  TimeNs busy_ns = 0;         // sum of its ops' durations
  TimeNs recompute_ns = 0;    // the part of busy_ns spent recomputing forwards
  TimeNs compute_end_ns = 0;  // end of its last op
  TimeNs update_ns = 0;       // once-per-iteration work after its last op
  TimeNs finish_ns = 0;       // compute_end_ns + update_ns
  Bytes static_bytes = 0;     // static + reserved bytes
  Bytes peak_memory_bytes = 0;
  TimeNs peak_time_ns = 0;    // first instant the peak is reached
  int max_in_flight = 0;      // most (stage, micro-batch) saved activations at once (not counting held W inputs)
  // With overlapped pairs (Pipeline::overlap): how much shorter its pairs ran than their ops one
  // after the other, the communication hidden under the partner's compute.
  TimeNs hidden_comm_ns = 0;
  std::vector<CommSpan> pair_comm;  // with overlapped pairs: each pair's two, in time order
};

// Bubble ratio as docs/semantics.md defines it, and the loss relative to useful compute broken down as
// the MindFormers tool prints it: real = ideal + imbalance + recompute, where
//   useful    W = sum over ranks of (busy - recompute),
//   real      = (p * iteration - W) / W,
//   ideal     = Schedule::IdealBubble(), the bubble of the schedule with equal stages and no p2p,
//   recompute = (sum of recompute time) / W,
//   imbalance = real - ideal - recompute (unequal stages, p2p and update time).
struct Bubble {
  double ratio = 0;  // 1 - busy time of the busiest rank / iteration time
  double real = 0;
  double ideal = 0;
  double imbalance = 0;
  double recompute = 0;
};

struct SimResult {
  TimeNs iteration_ns = 0;
  std::vector<std::vector<OpTiming>> op_timing;  // parallel to Schedule::rank_ops
  std::vector<RankResult> ranks;
  std::vector<std::vector<MemoryPoint>> memory;  // per rank, when SimOptions::record_memory
  Bubble bubble;
  PathCoefficients critical_path;  // how often the longest path uses each stage's F, B, W and p2p
  Bytes capacity_bytes = 0;
  bool fits = true;  // every rank's peak within capacity
};

struct SimOptions {
  bool record_memory = false;
};

// Simulates `schedule` with the given per-stage and per-rank costs. Fails only if the op order
// deadlocks (an op waits for one that its own rank runs later), which a schedule from
// a Schedule built from a valid pipeline never does.
Result<SimResult> Simulate(const Schedule& schedule, const std::vector<StageCost>& stages,
                           const std::vector<RankCost>& ranks, Bytes capacity_bytes, const SimOptions& options = {});

// Validates `plan` against `problem`, builds the problem's schedule and simulates the plan.
Result<SimResult> SimulatePlan(const Problem& problem, const Plan& plan, const SimOptions& options = {});

}  // namespace bmpipe

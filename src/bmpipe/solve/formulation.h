// The planner's integer program. docs/planner.md has the same text with the reasoning.
//
// Sets: stages s = 0..S-1 (S = p*v), on rank r(s) = s mod p as chunk c(s) = s div p; the
// candidates k of stage s (candidates.h); the ops o of the schedule; the memory rows i of each
// rank (in-flight counts q_ic and held counts h_ic per chunk, transient chunk t_i).
// Constants of candidate k: length n_k, start window [lo_k, hi_k], forward F_k, backward B_k
// (recomputation included), weight-gradient time W_k and held bytes H_k, p2p time P_k of its last
// layer's output, static bytes M_k, saved bytes A_k, transient bytes X_k, update time U_k.
//
// Variables: x_sk in {0,1}, stage s uses candidate k; b_s in [s+1, N-S+s+1], the first layer
// of stage s+1 (b_{-1} = 0 and b_{S-1} = N are constants); T >= 0, the iteration time; in the
// time-indexed form also tau_o >= 0, the start of op o.
// Stage terms are columns defined by rows (f), so that time rows stay sparse:
//  (f) dur[s]       F_s = sum_k F_k x_sk, B_s = sum_k B_k x_sk, P_s = sum_k P_k x_sk;
//                   U_r = sum_{s on r} sum_k U_k x_sk; with a split backward W_s = sum_k W_k x_sk;
//                   with overlapped pairs the communication Mf_s = sum_k Mf_k x_sk and
//                   Mb_s = sum_k Mb_k x_sk
//
// minimize T subject to
//  (a) one[s]       sum_k x_sk = 1
//  (b) len[s]       b_s - b_{s-1} = sum_k n_k x_sk
//  (c) start[s]     sum_k lo_k x_sk <= b_{s-1} <= sum_k hi_k x_sk
//  (d) mem[r,i]     sum_{s on r} sum_k (M_k + q_{i,c(s)} A_k + h_{i,c(s)} H_k + [t_i = c(s)] X_k) x_sk
//                     <= capacity - reserved (in thousandths of it)
//                   (only with several chunks per rank: with one, every candidate was checked
//                   exactly on its own)
//  (e) T is at least the length of every path of the schedule's dependency graph, in one of
//      two exact forms:
//   (e1) time-indexed: tau_o >= tau_o' + D_o' for the op o' before o on its rank, and for each
//        dependency o' of o (+ P of the boundary when o' is on another rank), where D is F_s or
//        B_s of the op's stage (a split B: B_s - W_s; W: W_s); T >= tau_o + D_o + U_r for the
//        last op o of rank r. In an overlapped pair (forward of stage a, backward of stage b;
//        sim/timing.h, TimeAction) D of the forward is max(F_a - Mf_a, Mb_b) and D of the backward
//        max(B_b' - Mb_b + W_b', Mf_a) - W_b' (B_b' its unsplit or split duration, W_b' the W
//        joined to it or 0): a row for each term of the max.
//   (e2) path cuts: T >= sum_s (f_s F_s + g_s B_s + w_s W_s + h_s P_s) + U_{r*} for a path
//        with f_s forward and g_s backward ops of stage s, w_s its W ops minus its split B ops,
//        h_s transfers over boundary s, ending on rank r*, and with overlapped pairs the terms
//        of Mf_s and Mb_s of the phases on the path (each pair phase one term of its max, so the
//        cut is below the path's length); added lazily: after each solve, the
//        critical path under the relaxation's durations if it is longer than T, until none is.
//  (g) T >= the rank-load bound (load_bound.h): integral layer counts per rank, which the
//      relaxation of (b) loses.
// For integer x the durations are the plan's, so T = the simulated iteration time in either
// form. Time is in units of time_unit_ns to keep the coefficients near 1.
#pragma once

#include <vector>

#include "bmpipe/problem/plan.h"
#include "bmpipe/schedule/schedule.h"
#include "bmpipe/sim/timing.h"
#include "bmpipe/solve/candidates.h"
#include "bmpipe/solve/linear_model.h"

namespace bmpipe {

// Seconds per candidate column that freeing a solver's copy of the program takes (measured: 0.4 s
// for 332k columns on the 2-core machine, rounded up): the solvers stop this long before their
// deadline.
inline constexpr double kFreeSecondsPerColumn = 1.5e-6;

struct Formulation {
  LinearModel model;
  std::vector<std::vector<int>> x;  // x[s][k]: column of x_sk
  std::vector<int> b;               // b[s], s = 0..S-2
  std::vector<int> forward, backward, p2p;  // F_s, B_s, P_s per stage
  std::vector<int> weight_grad;             // W_s per stage, when the schedule splits the backward
  std::vector<int> forward_comm, backward_comm;  // Mf_s, Mb_s per stage, when the pipeline overlaps its pairs
  std::vector<int> update;          // U_r per rank
  int t = -1;                       // column of T
  double t_floor = 0;               // the bound (g) on T, in time units
  double time_unit_ns = 1;
};

// Rows (a)-(d), columns x, b, T and the bound (g) (kept out of the rows: see t_floor), in the
// time unit ChooseTimeUnit picks.
// `binary` makes x integer (for CBC).
Formulation BuildFormulation(const Problem& problem, const Candidates& candidates, const Schedule& schedule,
                             bool binary);

// Adds the op start columns and the rows (e1).
void AddTimeIndexedRows(Formulation& f, const Problem& problem, const Schedule& schedule);

// The row (e2) of a path.
LinearRow PathCut(const Formulation& f, const PathCoefficients& path, int serial);

// Stage durations (in time units) of a possibly fractional solution.
Durations<double> RelaxedDurations(const Formulation& f, const std::vector<double>& solution);

// The plan of an integral solution (x within 1e-6 of 0 or 1).
Plan PlanFromSolution(const Formulation& f, const Problem& problem, const Candidates& candidates,
                      const std::vector<double>& solution);

// A time unit that keeps stage durations near 1..1000: a power of ten in nanoseconds.
double ChooseTimeUnit(const Candidates& candidates);

}  // namespace bmpipe

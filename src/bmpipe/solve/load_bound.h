// A lower bound on the iteration time from how many whole layers each rank must carry.
//
// Every rank runs all its ops one after another, so for each rank r
//   T >= pre_r + m * sum_{l on r} c_l + max(suf_r, sum_{l on r} u_l, suf_r + U_e)
// where c_l = min over l's options of (F + B + recomputation), u_l its update time, pre_r the
// dependency chain that must finish before r's first op and suf_r the chain that must follow r's
// last op (counted in ops and transfers from the schedule, each op at least the cheapest layer's,
// each transfer at least the cheapest p2p; a chain of k ops on distinct stages at least the k
// cheapest layers' ops, since each stage holds a layer of its own), and U_e the update of the rank
// e that chain ends on, which starts after e's last op (under 1F1B and interleaved 1F1B e is rank
// 0: its optimizer step waits for the last micro-batch's backward to come down the pipeline, so
// it sits on the path of every other rank). The bound is the least T for which the layers can be
// dealt to ranks so that every rank meets all three forms: layer 0 on rank 0, the last layer on
// the last stage's rank, at least v layers per rank, any k other layers on a rank costing at least
// the k cheapest, and U_e at least the updates of e's fixed layers and of the k_e least-updating
// layers when e is dealt k_e (where all chains end on one rank; else one per stage). Contiguity
// and memory are relaxed, so it is valid for every plan; what it keeps is integrality, which the
// linear relaxation loses: with 128 equal layers on 32 ranks and a heavy LM head on the last one,
// some rank carries 5 layers, while the relaxation spreads 130 layers' work evenly.
//
// With each rank's memory rows (candidates.h, MemoryRow) it also knows that a rank's layers must
// fit: the free layers a rank is dealt cost at least the least work of as many layers that fit in
// every row of it on their own (one knapsack per row over the options' work and saved bytes; one
// layer in each chunk whose stage holds no fixed layer, the others in the chunk they cost least
// in; transients left out; with free layers that differ, one no larger than any of them in every
// byte and no slower in any option). Where memory forces
// recomputation this is what the deal misses: on 32 layers, 8 ranks x 2 chunks, m = 64 the rank
// with five decoder layers must recompute two of them.
//
// With one chunk per rank the chains around rank r are the other ranks' own work, so also
// T >= sum_{s<r} (F_s + B_s) + m (F_r + B_r) for every r, whose least value over real stage costs
// summing to the cheapest total work W is W / (1 - (1 - 1/m)^p): half or more of the pipeline
// bubble, which the per-rank form misses when m is close to p.
#pragma once

#include "bmpipe/core/units.h"
#include "bmpipe/problem/problem.h"
#include "bmpipe/schedule/schedule.h"
#include "bmpipe/solve/candidates.h"

namespace bmpipe {

// The least time an option adds to its rank per micro-batch: forward, backward and
// recomputation; with overlapped pairs (pipeline.overlap) less its communication, which the
// partner's compute may hide.
TimeNs OptionWork(const Pipeline& pipeline, const LayerOption& option);

// The bound in nanoseconds, for a validated problem and its schedule. `stage_extra_ns`, when
// given, is work every stage must carry beyond its layers' cheapest options (per micro-batch of
// its copy; one value for every stage but the first and the last): a restricted space's, such as
// Megatron's block recomputation, which recomputes the first decoder layer of every stage that
// holds one.
// `memory_rows` (per rank, PeakMemoryRows or a subset of them), when given, adds the memory form
// (one copy of every stage, no overlapped pairs).
TimeNs RankLoadBound(const Problem& problem, const Schedule& schedule, TimeNs stage_extra_ns = 0,
                     const std::vector<std::vector<MemoryRow>>* memory_rows = nullptr);

}  // namespace bmpipe

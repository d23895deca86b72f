// The plan as a picture: per rank, a lane of forward and backward boxes per micro-batch (chunks
// shaded, the recomputation at the start of each backward hatched, idle time left blank), and
// under it the rank's memory over time against the capacity line. Several panels (for example
// bmpipe's plan and Megatron's best) share one time scale. Deterministic bytes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bmpipe/problem/plan.h"
#include "bmpipe/problem/problem.h"
#include "bmpipe/sim/simulator.h"

namespace bmpipe {

struct TimelinePanel {
  std::string label;  // e.g. "bmpipe (proven optimal)"
  Plan plan;
  SimResult sim;      // simulated with SimOptions::record_memory
};

// What a timeline shows of a production-size run: a time window and a subset of the ranks.
struct TimelineView {
  TimeNs begin_ns = 0;
  TimeNs end_ns = -1;          // negative: to the end of the longest panel's iteration
  std::vector<RankIdx> ranks;  // in the order drawn; empty: every rank
};

// The view of the command line's --svg-window "A:B" (seconds from the iteration's start; either
// side may be left empty) and --svg-ranks "0-3,8" (ranks and ranges); empty strings: everything.
Result<TimelineView> ParseTimelineView(const std::string& window, const std::string& ranks, const Problem& problem);

// Every box and memory lane carries a tooltip (<title>): the op, its stage, chunk, micro-batch,
// start, end and recomputation; the rank's peak, when and of what capacity. Fails when the view
// would draw more than kMaxTimelineOps boxes.
Result<std::string> TimelineSvg(const Problem& problem, const std::string& title, const std::vector<TimelinePanel>& panels,
                                const TimelineView& view = {});

// A timeline draws a box per op; past this many it is unreadable and its text grows without bound.
inline constexpr std::int64_t kMaxTimelineOps = 200'000;

// Fails when `panels` timelines of `problem` would draw more than kMaxTimelineOps boxes on the
// view's ranks (checked again, with the time window, when drawn).
Status CheckTimelineSize(const Problem& problem, int panels, const TimelineView& view = {});

}  // namespace bmpipe

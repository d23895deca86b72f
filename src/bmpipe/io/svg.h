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

std::string TimelineSvg(const Problem& problem, const std::string& title, const std::vector<TimelinePanel>& panels);

// A timeline draws a box per op; past this many it is unreadable and its text grows without bound.
inline constexpr std::int64_t kMaxTimelineOps = 200'000;

// Fails when `panels` timelines of `problem` would draw more than kMaxTimelineOps boxes.
Status CheckTimelineSize(const Problem& problem, int panels);

}  // namespace bmpipe

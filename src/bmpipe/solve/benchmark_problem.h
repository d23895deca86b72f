// The planning benchmark's problems (bench/planner_bench.cc), also used by tests.
#pragma once

#include "bmpipe/problem/problem.h"
#include "bmpipe/schedule/pipeline.h"

namespace bmpipe {

// Embedding, `layers` decoder layers, LM head with loss. Decoder: 10 ms forward, 20 ms
// backward; options none, selective (+1.5 ms, 45 % of the activations), full (+10 ms, 8 %).
// Memory is set so that without recomputation rank 0 does not fit (about 1.3x over), so the
// planner has to trade recomputation against balance.
// The weight gradients are half of every backward and hold a third of the activations (used by
// the split-backward schedules only).
Problem SyntheticPlannerProblem(ScheduleKind schedule, int layers, int ranks, int chunks, int micro_batches);

}  // namespace bmpipe

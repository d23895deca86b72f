// Why no plan fits: the rank that stays over capacity even with the most memory-saving choices.
#pragma once

#include <string>

#include "bmpipe/problem/plan.h"
#include "bmpipe/problem/problem.h"

namespace bmpipe {

struct MemoryShortfall {
  Plan plan;  // most memory-saving option on every layer, layers split to balance memory
  RankIdx rank = 0;
  Bytes peak_bytes = 0;  // simulated peak of `rank` under `plan`
  Bytes capacity_bytes = 0;
};

// Uses, on every layer, the option with the fewest saved bytes (then transient bytes), and the
// contiguous split that minimizes the largest per-stage memory (exact for one chunk per rank);
// simulates it and returns its worst rank.
MemoryShortfall DiagnoseMemory(const Problem& problem);

// A paragraph for the user: the shortfall and what would help.
std::string DescribeShortfall(const Problem& problem, const MemoryShortfall& shortfall);

}  // namespace bmpipe

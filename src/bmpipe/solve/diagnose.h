// Why no plan fits: the rank that stays over capacity even with the most memory-saving choices.
#pragma once

#include <string>

#include "bmpipe/problem/plan.h"
#include "bmpipe/problem/problem.h"
#include "bmpipe/solve/candidates.h"

namespace bmpipe {

// Per layer, the option with the fewest saved bytes (then the fewest transient bytes).
std::vector<OptionIdx> MostMemorySavingOptions(const Problem& problem);

// Ends of the stages (end[s] = first layer after stage s) of the contiguous split that minimizes
// the largest per-stage memory with the most memory-saving options: static + reserved + saved
// times the most micro-batches the stage's chunk holds at once + transient. Exact for one chunk
// per rank; a heuristic with several. The even split when the problem is too large for the
// O(S N^2) search.
std::vector<int> MemoryBalancedBoundaries(const Problem& problem, const std::vector<std::vector<MemoryRow>>& rows);

struct MemoryShortfall {
  Plan plan;  // most memory-saving option on every layer, layers split to balance memory
  RankIdx rank = 0;
  Bytes peak_bytes = 0;  // simulated peak of `rank` under `plan`
  Bytes capacity_bytes = 0;
};

// Simulates the memory-balanced split with the most memory-saving options and returns its worst
// rank.
MemoryShortfall DiagnoseMemory(const Problem& problem);

// A paragraph for the user: the shortfall and what would help.
std::string DescribeShortfall(const Problem& problem, const MemoryShortfall& shortfall);

}  // namespace bmpipe

// `bmpipe compare` output: a table with one row per planner, or the same as JSON rows.
#pragma once

#include <string>
#include <vector>

#include "bmpipe/baselines/compare.h"
#include "bmpipe/core/document.h"

namespace bmpipe {

// Memory utilization of a simulated plan: the mean over ranks of peak / capacity.
double MeanMemoryUtilization(const SimResult& sim);

std::string FormatCompare(const std::string& title, const Problem& problem, const std::vector<CompareRow>& rows);

// A list of rows: name, applicable, feasible, iteration_time_s, speedup_vs_megatron,
// peak_memory_bytes (per rank), memory utilization, bubble, planning_time_s, config, plan.
Json CompareToJson(const Problem& problem, const std::vector<CompareRow>& rows);

}  // namespace bmpipe

// The readable report of a simulated plan: pipeline, iteration time, bubble breakdown, one row
// per stage and one per rank.
#pragma once

#include <string>

#include "bmpipe/problem/plan.h"
#include "bmpipe/problem/problem.h"
#include "bmpipe/sim/simulator.h"
#include "bmpipe/solve/planner.h"

namespace bmpipe {

struct ReportHeader {
  std::string title;                                    // first line, e.g. "bmpipe simulate"
  std::vector<std::pair<std::string, std::string>> lines;  // label, value: inputs, plan origin
};

std::string FormatReport(const ReportHeader& header, const Problem& problem, const Plan& plan, const SimResult& sim);

// Header lines that say what the planner proved and what the search took.
std::vector<std::pair<std::string, std::string>> PlannerLines(const PlannerResult& result);

}  // namespace bmpipe

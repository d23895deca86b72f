// bmpipe's planner and every baseline on one problem, each plan judged by the same simulator:
// what `bmpipe compare` prints.
#pragma once

#include <string>
#include <vector>

#include "bmpipe/baselines/baselines.h"
#include "bmpipe/sim/simulator.h"

namespace bmpipe {

struct CompareRow {
  std::string name;  // "bmpipe" or a baseline's name
  bool applicable = true;
  std::string note;  // the configuration chosen, or why the planner does not apply
  bool has_plan = false;
  bool fits = false;
  Plan plan;
  SimResult sim;       // when has_plan
  std::string status;  // bmpipe only: "optimal" or "gap 1.23%"
  double seconds = 0;
};

struct CompareOptions {
  double time_limit_s = 60;  // for bmpipe, and for the baselines that run CBC
  std::vector<BaselineKind> baselines = AllBaselines();
};

// The first row is bmpipe's.
Result<std::vector<CompareRow>> Compare(const Problem& problem, const CompareOptions& options);

// The row named "megatron" that has a plan that fits, or nullptr.
const CompareRow* MegatronRow(const std::vector<CompareRow>& rows);

}  // namespace bmpipe

// What the Python package reads of problems and plans besides the commands: a problem from the
// cost model's keywords, every rank's ops as simulated, and the Chrome trace of a plan.
#pragma once

#include <string>
#include <vector>

#include "bmpipe/core/document.h"
#include "bmpipe/core/error.h"
#include "bmpipe/problem/problem.h"

namespace bmpipe::app {

// The cost model's problem for the keywords of --model, --device and the setup (AddModelOptions'
// table: model, device, tp, pp, ..., and `target`, whose settings' options are offered when no
// `recompute` is given), as `bmpipe plan --model` builds it.
Result<Problem> ModelProblem(const Json& keywords);

struct TimedOp {
  int stage = 0;
  int micro_batch = 0;
  char kind = 'F';  // F, B or W
  double start_s = 0, end_s = 0;
};
// Every rank's ops in its order, as the simulator runs the plan file's text `plan_text`.
Result<std::vector<std::vector<TimedOp>>> Timeline(const Problem& problem, const std::string& plan_text);
// The Chrome trace of the plan file's text `plan_text` (plan --trace).
Result<std::string> ChromeTrace(const Problem& problem, const std::string& plan_text, const std::string& title);

}  // namespace bmpipe::app

// What long work (the planner, compare, search) reports while it runs, for a person at a
// terminal or a program reading lines (report/progress_printer.h). The work calls the sink whenever
// something changes; the sink decides what to show and how often.
#pragma once

#include <functional>
#include <string>

namespace bmpipe {

struct Progress {
  std::string phase;        // what runs now, e.g. "candidate blocks", "branch and bound"
  double best_s = -1;       // iteration time of the best plan so far; negative: none yet
  double bound_s = -1;      // proven lower bound on the optimum; negative: none yet
  long nodes = -1;          // branch-and-bound nodes so far; negative: not searching
  int done = -1, total = -1;  // items finished of all (compare: planners; search: configurations)
};

// Called from the working thread(s); a sink given to multi-threaded work must be thread-safe.
using ProgressSink = std::function<void(const Progress&)>;

}  // namespace bmpipe

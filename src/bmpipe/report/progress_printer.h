// Progress of a long command on standard error: on a terminal, one line redrawn in place; else
// (a log, another program), one JSON object per line. Nothing for work that ends within its first
// second, so quick commands print exactly what they printed before.
#pragma once

#include <chrono>
#include <condition_variable>
#include <iosfwd>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "bmpipe/core/progress.h"

namespace bmpipe {

enum class ProgressMode {
  kNone,   // silent
  kBar,    // one line redrawn in place (a terminal)
  kLines,  // one JSON object per line
};

// "auto" (a bar on a terminal, lines otherwise), "bar", "lines" or "none"; `is_terminal` says
// whether standard error is one.
ProgressMode ProgressModeOf(const std::string& name, bool is_terminal);

// The redrawn line, e.g. "bmpipe plan: branch and bound, best 18.974 s, bound 18.857 s (gap 0.61%),
// 12 nodes, 3.1 s".
std::string ProgressText(const std::string& command, const Progress& p, double elapsed_s);
// The JSON line (without the newline): {"progress":"plan","phase":...,"elapsed_s":...} with
// done and total, best_s, bound_s, gap and nodes where known (times in seconds, 6 decimals).
std::string ProgressJson(const std::string& command, const Progress& p, double elapsed_s);

class ProgressPrinter {
 public:
  using Clock = std::chrono::steady_clock;
  // `command`: "plan", "compare", "search". Shows nothing before `quiet_s`, then a bar at most
  // every 0.1 s or a line at most every `interval_s` (and only when something changed, or every
  // 10 s). A thread of its own shows the latest report again as time passes (not with kNone).
  ProgressPrinter(std::ostream& out, ProgressMode mode, std::string command, double quiet_s = 1,
                  double interval_s = 1);
  ~ProgressPrinter();  // Finish()
  ProgressPrinter(const ProgressPrinter&) = delete;
  ProgressPrinter& operator=(const ProgressPrinter&) = delete;

  // Thread-safe.
  void Report(const Progress& p);
  // A sink that reports here (the printer must outlive it); empty when the mode is kNone.
  ProgressSink Sink();
  // Clears the bar and stops the thread; nothing is printed after.
  void Finish();

 private:
  void Show(const Progress& p);  // with lock_ held

  std::ostream& out_;
  ProgressMode mode_;
  std::string command_;
  double quiet_s_, interval_s_;
  Clock::time_point began_;
  std::mutex lock_;
  double shown_at_ = -1;  // elapsed seconds at the last line or redraw; negative: none yet
  std::string shown_;     // what it showed (without the elapsed time), to tell a change
  std::size_t bar_width_ = 0;
  bool finished_ = false;
  std::optional<Progress> latest_;
  std::condition_variable wake_;
  std::thread ticker_;
};

}  // namespace bmpipe

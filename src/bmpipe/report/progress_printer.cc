#include "bmpipe/report/progress_printer.h"
#include "bmpipe/core/document.h"

#include <algorithm>
#include <ostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace bmpipe {
namespace {

constexpr double kBarIntervalS = 0.1;
constexpr double kHeartbeatS = 10;  // a line even when nothing changed

// What the progress says, without the elapsed time: a change in it is worth a new line.
std::string Content(const Progress& p) {
  std::string s = p.phase;
  if (p.done >= 0 && p.total >= 0) s += fmt::format(", {} of {}", p.done, p.total);
  if (p.best_s >= 0) s += fmt::format(", best {:.3f} s", p.best_s);
  if (p.bound_s >= 0) {
    s += fmt::format(", bound {:.3f} s", p.bound_s);
    if (p.best_s > 0) s += fmt::format(" (gap {:.2f}%)", 100 * (p.best_s - p.bound_s) / p.best_s);
  }
  if (p.nodes >= 0) s += fmt::format(", {} node{}", p.nodes, p.nodes == 1 ? "" : "s");
  return s;
}

}  // namespace

ProgressMode ProgressModeOf(const std::string& name, bool is_terminal) {
  if (name == "none") return ProgressMode::kNone;
  if (name == "bar") return ProgressMode::kBar;
  if (name == "lines") return ProgressMode::kLines;
  return is_terminal ? ProgressMode::kBar : ProgressMode::kLines;
}

std::string ProgressText(const std::string& command, const Progress& p, double elapsed_s) {
  return fmt::format("bmpipe {}: {}, {:.1f} s", command, Content(p), elapsed_s);
}

std::string ProgressJson(const std::string& command, const Progress& p, double elapsed_s) {
  // Fixed decimals (times to the microsecond), not the shortest round trip of a double.
  std::string s = fmt::format(R"({{"progress":{},"phase":{},"elapsed_s":{:.3f})", DumpJson(Json(command)),
                              DumpJson(Json(p.phase)), elapsed_s);
  if (p.done >= 0 && p.total >= 0) s += fmt::format(R"(,"done":{},"total":{})", p.done, p.total);
  if (p.best_s >= 0) s += fmt::format(R"(,"best_s":{:.6f})", p.best_s);
  if (p.bound_s >= 0) s += fmt::format(R"(,"bound_s":{:.6f})", p.bound_s);
  if (p.best_s > 0 && p.bound_s >= 0) s += fmt::format(R"(,"gap":{:.6f})", (p.best_s - p.bound_s) / p.best_s);
  if (p.nodes >= 0) s += fmt::format(R"(,"nodes":{})", p.nodes);
  return s + "}";
}

ProgressPrinter::ProgressPrinter(std::ostream& out, ProgressMode mode, std::string command, double quiet_s,
                                 double interval_s)
    : out_(out),
      mode_(mode),
      command_(std::move(command)),
      quiet_s_(quiet_s),
      interval_s_(interval_s),
      began_(Clock::now()) {
  if (mode_ == ProgressMode::kNone) return;
  // Shows the latest report again as time passes, so that a long phase that reports nothing (a
  // local search, candidate generation) still shows the command alive, its elapsed time moving.
  ticker_ = std::thread([this] {
    std::unique_lock<std::mutex> guard(lock_);
    const auto tick = std::chrono::duration<double>(mode_ == ProgressMode::kBar ? kBarIntervalS : std::max(0.1, interval_s_));
    while (!finished_) {
      wake_.wait_for(guard, tick);
      if (!finished_ && latest_) Show(*latest_);
    }
  });
}

ProgressPrinter::~ProgressPrinter() { Finish(); }

void ProgressPrinter::Report(const Progress& p) {
  if (mode_ == ProgressMode::kNone) return;
  std::lock_guard<std::mutex> guard(lock_);
  if (finished_) return;
  latest_ = p;
  Show(p);
}

void ProgressPrinter::Show(const Progress& p) {
  const double elapsed = std::chrono::duration<double>(Clock::now() - began_).count();
  if (elapsed < quiet_s_) return;
  const double since = shown_at_ < 0 ? 1e300 : elapsed - shown_at_;
  std::string content = Content(p);
  if (mode_ == ProgressMode::kBar) {
    if (since < kBarIntervalS) return;
    std::string line = ProgressText(command_, p, elapsed);
    const std::size_t width = line.size();
    if (line.size() < bar_width_) line += std::string(bar_width_ - line.size(), ' ');
    out_ << '\r' << line << std::flush;
    bar_width_ = width;
  } else {
    if (since < interval_s_ || (content == shown_ && since < kHeartbeatS)) return;
    out_ << ProgressJson(command_, p, elapsed) << '\n' << std::flush;
  }
  shown_at_ = elapsed;
  shown_ = std::move(content);
}

ProgressSink ProgressPrinter::Sink() {
  if (mode_ == ProgressMode::kNone) return nullptr;
  return [this](const Progress& p) { Report(p); };
}

void ProgressPrinter::Finish() {
  {
    std::lock_guard<std::mutex> guard(lock_);
    if (finished_) return;
    finished_ = true;
    if (mode_ == ProgressMode::kBar && bar_width_ > 0) out_ << '\r' << std::string(bar_width_, ' ') << '\r' << std::flush;
  }
  wake_.notify_all();
  if (ticker_.joinable()) ticker_.join();
}

}  // namespace bmpipe

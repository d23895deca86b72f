// A deadline for long-running work: the planner, its candidate generation, the baselines and the
// search take one and stop at it, leaving their results marked as stopped (never as complete).
// A plain value: copy it into each piece of work; reading it from several threads at once is
// safe. It may also watch a flag its owner sets to stop the work early (the command line's
// Ctrl-C): then it expires when the flag is set, whichever comes first. Expired() reads the
// steady clock (tens of nanoseconds); loops whose steps are cheaper poll it through DeadlinePoll.
#pragma once

#include <atomic>
#include <chrono>

namespace bmpipe {

class Deadline {
 public:
  using Clock = std::chrono::steady_clock;

  // Never expires.
  Deadline() = default;
  static Deadline Never() { return Deadline(); }
  // `seconds` from now. Zero or negative: already expired; NaN, infinite or beyond a century:
  // never (a limit that large is no limit, and would overflow the clock).
  static Deadline In(double seconds);

  // This deadline, also expiring once `*stop` is true (it must outlive every copy).
  Deadline StoppedBy(const std::atomic<bool>* stop) const;

  bool Expired() const { return Stopped() || (finite_ && Clock::now() >= at_); }
  // True when the stop flag, not the clock, ended it.
  bool Stopped() const { return stop_ != nullptr && stop_->load(std::memory_order_relaxed); }
  // Never expires: no time and no stop flag.
  bool IsNever() const { return !finite_ && stop_ == nullptr; }
  // Seconds until it expires: 0 once expired, infinity without a time.
  double SecondsLeft() const;
  // The sooner of the two (watching the stop flag of either; this one's when both have one).
  Deadline Earlier(const Deadline& other) const;
  // The sooner of this one and `fraction` of the time left from now (a share for one step).
  Deadline Share(double fraction) const;
  // This deadline `seconds` later (a grace after it), watching the same stop flag.
  Deadline Extended(double seconds) const;

 private:
  bool finite_ = false;
  Clock::time_point at_{};
  const std::atomic<bool>* stop_ = nullptr;
};

// Polls a deadline every `period` calls, for inner loops whose steps cost less than reading the
// clock. Once expired it stays expired.
class DeadlinePoll {
 public:
  explicit DeadlinePoll(const Deadline& deadline, int period = 256) : deadline_(deadline), period_(period) {}
  bool Expired() {
    if (expired_ || deadline_.IsNever()) return expired_;
    if (++count_ < period_) return false;
    count_ = 0;
    expired_ = deadline_.Expired();
    return expired_;
  }

 private:
  Deadline deadline_;
  int period_;
  int count_ = 0;
  bool expired_ = false;
};

}  // namespace bmpipe

#include "bmpipe/core/deadline.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace bmpipe {
namespace {

constexpr double kCenturyS = 100.0 * 365 * 24 * 3600;

}  // namespace

Deadline Deadline::In(double seconds) {
  Deadline d;
  if (std::isnan(seconds) || seconds > kCenturyS) return d;
  d.finite_ = true;
  d.at_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(std::max(seconds, 0.0)));
  return d;
}

Deadline Deadline::StoppedBy(const std::atomic<bool>* stop) const {
  Deadline d = *this;
  d.stop_ = stop;
  return d;
}

double Deadline::SecondsLeft() const {
  if (Stopped()) return 0;
  if (!finite_) return std::numeric_limits<double>::infinity();
  return std::max(0.0, std::chrono::duration<double>(at_ - Clock::now()).count());
}

Deadline Deadline::Earlier(const Deadline& other) const {
  Deadline d = !finite_ ? other : !other.finite_ ? *this : at_ <= other.at_ ? *this : other;
  d.stop_ = stop_ != nullptr ? stop_ : other.stop_;
  return d;
}

Deadline Deadline::Share(double fraction) const {
  if (!finite_) return *this;
  return Earlier(In(SecondsLeft() * fraction));
}

Deadline Deadline::Extended(double seconds) const {
  if (!finite_) return *this;
  Deadline d = *this;
  d.at_ += std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(std::max(seconds, 0.0)));
  return d;
}

}  // namespace bmpipe

// Units. Time is an integer number of nanoseconds and memory an integer number of bytes, so
// that simulation and planning are exact and deterministic. Inputs in seconds are rounded to the
// nearest nanosecond once, when they are read.
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>

namespace bmpipe {

using TimeNs = std::int64_t;
using Bytes = std::int64_t;

inline constexpr TimeNs kNsPerSecond = 1'000'000'000;

inline double ToSeconds(TimeNs t) { return static_cast<double>(t) / 1e9; }

// The largest single time and byte count an input may give (README, "Limits"): far beyond any real
// device, so that a value past them is a unit mistake; sums of them are checked where a problem is
// validated.
inline constexpr double kMaxInputSeconds = 1e6;
inline constexpr double kMaxInputBytes = 1e15;

// Seconds in [0, kMaxInputSeconds] rounded to the nearest nanosecond; nullopt for anything else
// (negative, not finite, too large), so no conversion can overflow.
inline std::optional<TimeNs> CheckedNs(double seconds) {
  if (!(seconds >= 0 && seconds <= kMaxInputSeconds)) return std::nullopt;
  return static_cast<TimeNs>(std::llround(seconds * 1e9));
}

// Bytes in [0, kMaxInputBytes] rounded to the nearest byte; nullopt for anything else.
inline std::optional<Bytes> CheckedBytes(double bytes) {
  if (!(bytes >= 0 && bytes <= kMaxInputBytes)) return std::nullopt;
  return static_cast<Bytes>(std::llround(bytes));
}

}  // namespace bmpipe

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
// The same in floating point: nanoseconds per second, and bytes per gigabyte (decimal, as device
// data sheets and reports use). Conversions divide or multiply by them, nothing else.
inline constexpr double kSecondNs = 1e9;
inline constexpr double kGigabyte = 1e9;
// Counts in billions (parameters in reports).
inline constexpr double kBillion = 1e9;

inline double ToSeconds(TimeNs t) { return static_cast<double>(t) / kSecondNs; }
// A time in nanoseconds held as a double (a bound, an objective) in seconds.
inline double ToSeconds(double ns) { return ns / kSecondNs; }
inline double ToGigabytes(Bytes b) { return static_cast<double>(b) / kGigabyte; }

// The largest single time and byte count an input may give (README, "Limits"): far beyond any real
// device, so that a value past them is a unit mistake; sums of them are checked where a problem is
// validated.
inline constexpr double kMaxInputSeconds = 1e6;
inline constexpr double kMaxInputBytes = 1e15;

// Seconds in [0, kMaxInputSeconds] rounded to the nearest nanosecond; nullopt for anything else
// (negative, not finite, too large), so no conversion can overflow.
inline std::optional<TimeNs> CheckedNs(double seconds) {
  if (!(seconds >= 0 && seconds <= kMaxInputSeconds)) return std::nullopt;
  return static_cast<TimeNs>(std::llround(seconds * kSecondNs));
}

// Bytes in [0, kMaxInputBytes] rounded to the nearest byte; nullopt for anything else.
inline std::optional<Bytes> CheckedBytes(double bytes) {
  if (!(bytes >= 0 && bytes <= kMaxInputBytes)) return std::nullopt;
  return static_cast<Bytes>(std::llround(bytes));
}

}  // namespace bmpipe

// Units. Time is an integer number of nanoseconds and memory an integer number of bytes, so
// that simulation and planning are exact and deterministic. Inputs in seconds are rounded to the
// nearest nanosecond once, when they are read.
#pragma once

#include <cstdint>

namespace bmpipe {

using TimeNs = std::int64_t;
using Bytes = std::int64_t;

inline constexpr TimeNs kNsPerSecond = 1'000'000'000;

inline double ToSeconds(TimeNs t) { return static_cast<double>(t) / 1e9; }

}  // namespace bmpipe

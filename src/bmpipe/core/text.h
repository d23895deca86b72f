// Human-readable numbers for reports and messages.
#pragma once

#include <string>
#include <vector>

#include "bmpipe/core/units.h"

namespace bmpipe {

// "56.367 s", "12.40 ms", "850.0 us", "0 s".
std::string FormatDuration(TimeNs t);
// "55.10 GB", "123.4 MB", "4.0 kB", "12 B" (decimal units, as device data sheets use).
std::string FormatBytes(Bytes b);
// "a, b or c": a list of words for help texts and messages.
std::string WordsOr(const std::vector<std::string>& words);

}  // namespace bmpipe

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
// `text` as a message may echo it: whole when short, else its first `keep` bytes (cut before a
// UTF-8 continuation byte), "...", and its size ("[0]*3+[1]... (2000000 characters)").
std::string Abbreviated(const std::string& text, std::size_t keep = 60);

}  // namespace bmpipe

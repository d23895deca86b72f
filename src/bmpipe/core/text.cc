#include "bmpipe/core/text.h"

#include <cstdlib>

#include <fmt/format.h>

namespace bmpipe {

std::string FormatDuration(TimeNs t) {
  const double s = ToSeconds(t);
  const double a = std::abs(s);
  if (t == 0) return "0 s";
  if (a >= 1.0) return fmt::format("{:.3f} s", s);
  if (a >= 1e-3) return fmt::format("{:.3f} ms", s * 1e3);
  return fmt::format("{:.3f} us", s * 1e6);
}

std::string FormatBytes(Bytes b) {
  const double d = static_cast<double>(b);
  const double a = std::abs(d);
  if (a >= kGigabyte) return fmt::format("{:.2f} GB", d / kGigabyte);
  if (a >= 1e6) return fmt::format("{:.1f} MB", d / 1e6);
  if (a >= 1e3) return fmt::format("{:.1f} kB", d / 1e3);
  return fmt::format("{} B", b);
}

std::string Abbreviated(const std::string& text, std::size_t keep) {
  if (text.size() <= 2 * keep) return text;
  std::size_t cut = keep;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xc0) == 0x80) --cut;
  return text.substr(0, cut) + "... (" + std::to_string(text.size()) + " characters)";
}

std::string WordsOr(const std::vector<std::string>& words) {
  std::string out;
  for (std::size_t i = 0; i < words.size(); ++i) out += (i == 0 ? "" : i + 1 == words.size() ? " or " : ", ") + words[i];
  return out;
}

}  // namespace bmpipe

#include "bmpipe/frameworks/launcher_args.h"

#include <algorithm>
#include <cctype>
#include <string_view>
#include <unordered_set>

#include <fmt/format.h>

#include "bmpipe/core/json_cursor.h"
#include "bmpipe/core/text.h"

namespace bmpipe {
namespace {

[[noreturn]] void Fail(const std::string& message) { throw internal::CursorFailure{message}; }

}  // namespace

void FailConfiguration(const std::string& message) { Fail(message); }

std::vector<ShellWord> ShellWords(const std::string& text) {
  std::vector<ShellWord> words;
  std::size_t i = 0;
  int line = 1;
  while (i < text.size()) {
    const char c = text[i];
    if (c == '\n') ++line;
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
      ++i;
      continue;
    }
    if (c == '\\' && i + 1 < text.size() && text[i + 1] == '\n') {
      i += 2;
      ++line;
      continue;
    }
    if (c == '#') {
      while (i < text.size() && text[i] != '\n') ++i;
      continue;
    }
    ShellWord word{"", line};
    while (i < text.size()) {
      const char d = text[i];
      if (d == ' ' || d == '\t' || d == '\r' || d == '\n') break;
      if (d == '\\') {
        if (i + 1 < text.size() && text[i + 1] == '\n') {
          ++line;
        } else if (i + 1 < text.size()) {
          word.text += text[i + 1];
        }
        i += 2;
      } else if (d == '\'' || d == '"') {
        const std::size_t open = i++;
        while (i < text.size() && text[i] != d) {
          if (text[i] == '\n') ++line;
          if (d == '"' && text[i] == '\\' && i + 1 < text.size() && std::string_view("\"\\$`").find(text[i + 1]) != std::string_view::npos) {
            ++i;
          }
          word.text += text[i++];
        }
        if (i >= text.size()) {
          Fail(fmt::format("line {}: the quote {} opened here is not closed; close it", word.line, text[open]));
        }
        ++i;
      } else {
        word.text += d;
        ++i;
      }
    }
    words.push_back(word);
  }
  return words;
}

Flags ReadFlags(const std::vector<ShellWord>& words, const std::map<std::string, Arity>& known) {
  Flags flags;
  auto is_flag = [](const std::string& w) { return w.size() > 2 && w.compare(0, 2, "--") == 0; };
  auto ends_values = [&](const std::string& w) { return is_flag(w) || w.find(':') != std::string::npos; };
  std::unordered_set<std::string> seen;  // the words set aside, each listed once (linear time)
  auto ignore = [&](const std::string& w) {
    if (seen.insert(w).second) flags.ignored.push_back(w);
  };
  for (std::size_t i = 0; i < words.size(); ++i) {
    const ShellWord& w = words[i];
    if (!is_flag(w.text)) {
      const std::size_t colon = w.text.find(':');
      if (colon != std::string::npos && known.count(w.text.substr(0, colon)) != 0) {
        flags.given[w.text.substr(0, colon)] = Flag{w.text.substr(0, colon), {w.text.substr(colon + 1)}};
      } else {
        ignore(w.text);
      }
      continue;
    }
    const std::size_t eq = w.text.find('=');
    const std::string name = w.text.substr(0, eq);
    auto it = known.find(name);
    if (it == known.end()) {
      ignore(name);
      while (eq == std::string::npos && i + 1 < words.size() && !ends_values(words[i + 1].text)) ++i;
      continue;
    }
    Flag flag{name, {}};
    if (eq != std::string::npos) flag.values.push_back(w.text.substr(eq + 1));
    switch (it->second) {
      case Arity::kNone:
        if (!flag.values.empty()) Fail(fmt::format("line {}: {} takes no value; give {} alone", w.line, w.text, name));
        break;
      case Arity::kOne:
        if (flag.values.empty()) {
          if (i + 1 >= words.size() || is_flag(words[i + 1].text)) {
            Fail(fmt::format("line {}: {} needs a value; give {} VALUE", w.line, name, name));
          }
          flag.values.push_back(words[++i].text);
        }
        break;
      case Arity::kMany:
        while (i + 1 < words.size() && !ends_values(words[i + 1].text)) flag.values.push_back(words[++i].text);
        break;
    }
    flags.given[name] = flag;
  }
  return flags;
}

std::int64_t IntegerValue(const Flag& flag, std::int64_t min, std::int64_t max) {
  const std::string& v = flag.values.front();
  // A leading '-' where the range takes negative values (torchtitan's -1, "the rest").
  const bool negative = min < 0 && v.size() > 1 && v[0] == '-';
  const std::string magnitude = negative ? v.substr(1) : v;
  std::int64_t x = 0;
  bool digits = !magnitude.empty() && magnitude.size() <= 18;
  for (char c : magnitude) {
    digits = digits && std::isdigit(static_cast<unsigned char>(c));
    if (digits) x = x * 10 + (c - '0');
  }
  if (negative) x = -x;
  if (!digits || x < min || x > max) {
    Fail(fmt::format("{} {}: give a whole number from {} to {}", flag.name, v, min, max));
  }
  return x;
}

void CheckValue(const Flags& flags, const std::string& name, std::int64_t absent, std::int64_t want,
                const std::string& key, std::int64_t max) {
  const Flag* flag = flags.Get(name);
  const std::int64_t given = flag ? IntegerValue(*flag, 0, max) : absent;
  if (given != want) {
    Fail(fmt::format("{} {}{}: the problem's run has {} = {}; this configuration is not that run (give {} {}, or the "
                     "problem of this configuration)",
                     name, given, flag ? "" : " (not given: Megatron's default)", key, want, name, want));
  }
}

void CheckSwitch(const Flags& flags, const std::string& name, bool want, const std::string& key) {
  const bool given = flags.Get(name) != nullptr;
  if (given != want) {
    Fail(fmt::format("{} is {}: the problem's run has {} = {}; this configuration is not that run ({} {}, or give the "
                     "problem of this configuration)",
                     name, given ? "given" : "not given", key, want ? "true" : "false", want ? "give" : "remove", name));
  }
}

std::string ListedWords(const std::vector<std::string>& words) {
  std::string out;
  for (std::size_t i = 0; i < words.size() && i < kListedWords; ++i) out += (i == 0 ? "" : " ") + Abbreviated(words[i]);
  if (words.size() > kListedWords) out += fmt::format(" ... and {} more", words.size() - kListedWords);
  return out;
}

std::string IgnoredNote(const std::vector<std::string>& ignored, const std::string& what) {
  return fmt::format("not read ({}): {}", what, ListedWords(ignored));
}

}  // namespace bmpipe

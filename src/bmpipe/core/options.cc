#include "bmpipe/core/options.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "bmpipe/core/json_cursor.h"
#include "bmpipe/core/text.h"

namespace bmpipe {
namespace {

std::vector<std::string> Keys(const OptionTable& table) {
  std::vector<std::string> keys;
  for (const Option& o : table.options()) {
    if (!o.key.empty()) keys.push_back(o.key);
  }
  return keys;
}

// The value as the command line would have taken it, or an error naming what it takes.
class KeywordReader {
 public:
  KeywordReader(const Option& option, const Json& value, const std::string& command)
      : o_(option), v_(value), where_(fmt::format("{}: {}", command, option.key)) {}

  Status Read() {
    return std::visit([this](auto* field) { return Set(field); }, o_.field);
  }

 private:
  Error Wrong(const std::string& what) const { return InvalidInput(fmt::format("{} {}: {}", where_, v_.dump(), what)); }

  Status CheckNumber(double x) const {
    switch (o_.check) {
      case OptionCheck::kNone:
        return {};
      case OptionCheck::kPositive:
        return x > 0 ? Status{} : Status(Wrong("give a positive number"));
      case OptionCheck::kNonNegative:
        return x >= 0 ? Status{} : Status(Wrong("give 0 or more"));
      case OptionCheck::kRange:
        return x >= o_.min && x <= o_.max ? Status{} : Status(Wrong(fmt::format("give a number from {:g} to {:g}", o_.min, o_.max)));
    }
    return {};
  }
  Status CheckWord(const std::string& word) const {
    if (o_.choices.empty() || std::find(o_.choices.begin(), o_.choices.end(), word) != o_.choices.end()) return {};
    return InvalidInput(fmt::format("{} '{}'{}: use {}", where_, word, DidYouMean(word, o_.choices), WordsOr(o_.choices)));
  }
  Result<std::int64_t> Integer(const Json& v, std::int64_t lo, std::int64_t hi) const {
    if (!v.is_number_integer()) return Wrong("give a whole number");
    const bool huge = v.is_number_unsigned() &&
                      v.get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
    const std::int64_t x = huge ? 0 : v.get<std::int64_t>();
    if (huge || x < lo || x > hi) return Wrong(fmt::format("give a whole number from {} to {}", lo, hi));
    if (Status checked = CheckNumber(static_cast<double>(x)); !checked.ok()) return checked.error();
    return x;
  }

  Status Set(bool* field) {
    if (!v_.is_boolean()) return Wrong("give true or false");
    *field = v_.get<bool>();
    return {};
  }
  Status Set(int* field) {
    Result<std::int64_t> x = Integer(v_, std::numeric_limits<int>::min(), std::numeric_limits<int>::max());
    if (!x.ok()) return x.error();
    *field = static_cast<int>(x.value());
    return {};
  }
  Status Set(long* field) {
    Result<std::int64_t> x = Integer(v_, std::numeric_limits<long>::min(), std::numeric_limits<long>::max());
    if (!x.ok()) return x.error();
    *field = static_cast<long>(x.value());
    return {};
  }
  Status Set(double* field) {
    if (!v_.is_number()) return Wrong("give a number");
    const double x = v_.get<double>();
    if (!std::isfinite(x)) return Wrong("give a finite number");
    if (Status checked = CheckNumber(x); !checked.ok()) return checked;
    *field = x;
    return {};
  }
  Status Set(std::string* field) {
    if (!v_.is_string()) return Wrong("give a string");
    if (Status word = CheckWord(v_.get<std::string>()); !word.ok()) return word;
    *field = v_.get<std::string>();
    return {};
  }
  Status Set(std::vector<std::string>* field) {
    std::vector<std::string> words;
    if (v_.is_string()) {
      const std::string text = v_.get<std::string>();
      if (!o_.comma_separated) {
        words.push_back(text);
      } else {
        for (std::size_t at = 0; at <= text.size();) {
          std::size_t end = text.find(',', at);
          if (end == std::string::npos) end = text.size();
          words.push_back(text.substr(at, end - at));
          at = end + 1;
        }
      }
    } else if (v_.is_array()) {
      for (const Json& w : v_) {
        if (!w.is_string()) return Wrong("give a list of strings");
        words.push_back(w.get<std::string>());
      }
    } else {
      return Wrong("give a list of strings");
    }
    for (const std::string& w : words) {
      if (Status word = CheckWord(w); !word.ok()) return word;
    }
    *field = std::move(words);
    return {};
  }
  Status Set(std::vector<int>* field) {
    std::vector<int> values;
    const Json list = v_.is_array() ? v_ : Json::array({v_});
    for (const Json& x : list) {
      Result<std::int64_t> n = Integer(x, std::numeric_limits<int>::min(), std::numeric_limits<int>::max());
      if (!n.ok()) return n.error();
      values.push_back(static_cast<int>(n.value()));
    }
    *field = std::move(values);
    return {};
  }

  const Option& o_;
  const Json& v_;
  std::string where_;
};

}  // namespace

Option& OptionTable::Add(std::string flags, std::string key, OptionField field, std::string help) {
  Option o;
  o.flags = std::move(flags);
  o.key = std::move(key);
  o.field = field;
  o.help = std::move(help);
  o.given_keys = record_;
  options_.push_back(std::move(o));
  return options_.back();
}

void OptionTable::Append(const OptionTable& more) {
  options_.insert(options_.end(), more.options().begin(), more.options().end());
}

Option* OptionTable::Find(const std::string& name) {
  for (Option& o : options_) {
    if (o.key == name) return &o;
    // flags: "-s,--stages"
    for (std::size_t at = 0; at <= o.flags.size();) {
      std::size_t end = o.flags.find(',', at);
      if (end == std::string::npos) end = o.flags.size();
      if (o.flags.compare(at, end - at, name) == 0 && end - at == name.size()) return &o;
      at = end + 1;
    }
  }
  return nullptr;
}

Status ReadOptions(const OptionTable& table, const Json& keywords, const std::string& command) {
  if (!keywords.is_object()) return InvalidInput(fmt::format("{}: the options must be keywords", command));
  for (const auto& [key, value] : keywords.items()) {
    if (value.is_null()) continue;
    const Option* option = nullptr;
    for (const Option& o : table.options()) {
      if (!o.key.empty() && o.key == key) option = &o;
    }
    if (option == nullptr) {
      const std::vector<std::string> keys = Keys(table);
      return InvalidInput(fmt::format("{}: unknown keyword '{}'{}; keywords: {}", command, key, DidYouMean(key, keys),
                                      fmt::join(keys, ", ")));
    }
    if (Status read = KeywordReader(*option, value, command).Read(); !read.ok()) return read;
    if (option->given) *option->given = true;
    if (option->given_keys) option->given_keys->insert(option->key);
  }
  return {};
}

std::string KeywordHelp(const OptionTable& table) {
  std::string out;
  for (const Option& o : table.options()) {
    if (o.key.empty()) continue;
    std::string help = o.help;
    const std::string indent = "\n      ";
    for (std::size_t at = help.find('\n'); at != std::string::npos; at = help.find('\n', at + indent.size())) {
      help.replace(at, 1, indent);
    }
    out += fmt::format("  {}: {}\n", o.key, help);
  }
  return out;
}

}  // namespace bmpipe

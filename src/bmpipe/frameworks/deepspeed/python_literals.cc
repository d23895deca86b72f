#include "bmpipe/frameworks/deepspeed/python_literals.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace bmpipe {
namespace {

class PythonLiterals {
 public:
  explicit PythonLiterals(const std::string& text) : text_(text) {}

  Json Read(std::vector<std::string>& computed) {
    // The names in order of first assignment; a later assignment replaces the value (Python's
    // last one wins), an expression removes it. Hash maps keep this linear in the module's size.
    std::vector<std::pair<std::string, std::optional<Json>>> assigned;
    std::unordered_map<std::string, std::size_t> at;
    std::unordered_set<std::string> expressions;
    std::size_t line_start = 0;
    while (line_start < text_.size()) {
      pos_ = line_start;
      std::string name;
      while (pos_ < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_')) {
        name += text_[pos_++];
      }
      SkipBlanks();
      const bool assignment = !name.empty() && !std::isdigit(static_cast<unsigned char>(name[0])) && pos_ < text_.size() &&
                              text_[pos_] == '=' && (pos_ + 1 >= text_.size() || text_[pos_ + 1] != '=');
      std::size_t next = text_.find('\n', line_start);
      next = next == std::string::npos ? text_.size() : next + 1;
      if (assignment) {
        ++pos_;
        std::optional<Json> value = Value(0);
        const bool literal = value && AtLineEnd();
        auto [it, added] = at.emplace(name, assigned.size());
        if (added) assigned.emplace_back(name, std::nullopt);
        assigned[it->second].second = literal ? std::move(value) : std::nullopt;
        if (literal) {
          expressions.erase(name);
          next = pos_;
        } else {
          expressions.insert(name);
        }
      }
      line_start = next;
    }
    Json out = Json::object();
    for (auto& [name, value] : assigned) {
      if (value) AppendMember(out, name, std::move(*value));
      if (expressions.count(name)) computed.push_back(name);
    }
    return out;
  }

 private:
  void SkipBlanks() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t')) ++pos_;
  }
  // Inside brackets: blanks, newlines, comments and backslash-newlines.
  void SkipSpace() {
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
        ++pos_;
      } else if (c == '#') {
        while (pos_ < text_.size() && text_[pos_] != '\n') ++pos_;
      } else if (c == '\\' && pos_ + 1 < text_.size() && text_[pos_ + 1] == '\n') {
        pos_ += 2;
      } else {
        break;
      }
    }
  }
  bool AtLineEnd() {
    SkipBlanks();
    if (pos_ < text_.size() && text_[pos_] == '#') {
      while (pos_ < text_.size() && text_[pos_] != '\n') ++pos_;
    }
    if (pos_ < text_.size() && text_[pos_] == '\r') ++pos_;
    if (pos_ >= text_.size()) return true;
    if (text_[pos_] != '\n') return false;
    ++pos_;
    return true;
  }

  std::optional<Json> Value(int depth) {
    if (depth > kMaxDocumentDepth) return std::nullopt;
    depth > 0 ? SkipSpace() : SkipBlanks();
    if (pos_ >= text_.size()) return std::nullopt;
    const char c = text_[pos_];
    if (c == '[' || c == '(') return Sequence(c == '[' ? ']' : ')', depth);
    if (c == '{') return Dict(depth);
    if (c == '"' || c == '\'') return String();
    if (c == '-' || c == '+' || std::isdigit(static_cast<unsigned char>(c))) return Number();
    for (const auto& [word, value] : {std::pair<const char*, Json>{"True", true}, {"False", false}, {"None", nullptr}}) {
      const std::size_t n = std::char_traits<char>::length(word);
      if (text_.compare(pos_, n, word) == 0 &&
          (pos_ + n >= text_.size() || !(std::isalnum(static_cast<unsigned char>(text_[pos_ + n])) || text_[pos_ + n] == '_'))) {
        pos_ += n;
        return value;
      }
    }
    return std::nullopt;
  }

  std::optional<Json> Sequence(char close, int depth) {
    ++pos_;
    Json out = Json::array();
    while (true) {
      SkipSpace();
      if (pos_ < text_.size() && text_[pos_] == close) {
        ++pos_;
        return out;
      }
      std::optional<Json> item = Value(depth + 1);
      if (!item) return std::nullopt;
      out.push_back(std::move(*item));
      SkipSpace();
      if (pos_ < text_.size() && text_[pos_] == ',') {
        ++pos_;
      } else if (pos_ >= text_.size() || text_[pos_] != close) {
        return std::nullopt;
      }
    }
  }

  std::optional<Json> Dict(int depth) {
    ++pos_;
    // Keys in order of first appearance, a repeated key's last value (Python's dict literal).
    std::vector<std::pair<std::string, Json>> members;
    std::unordered_map<std::string, std::size_t> at;
    auto finish = [&] {
      Json out = Json::object();
      for (auto& [key, value] : members) AppendMember(out, key, std::move(value));
      return out;
    };
    while (true) {
      SkipSpace();
      if (pos_ < text_.size() && text_[pos_] == '}') {
        ++pos_;
        return finish();
      }
      std::optional<Json> key = Value(depth + 1);
      if (!key || !key->is_string()) return std::nullopt;
      SkipSpace();
      if (pos_ >= text_.size() || text_[pos_] != ':') return std::nullopt;
      ++pos_;
      std::optional<Json> item = Value(depth + 1);
      if (!item) return std::nullopt;
      auto [it, added] = at.emplace(key->get<std::string>(), members.size());
      if (added) {
        members.emplace_back(key->get<std::string>(), std::move(*item));
      } else {
        members[it->second].second = std::move(*item);
      }
      SkipSpace();
      if (pos_ < text_.size() && text_[pos_] == ',') {
        ++pos_;
      } else if (pos_ >= text_.size() || text_[pos_] != '}') {
        return std::nullopt;
      }
    }
  }

  std::optional<Json> String() {
    const char quote = text_[pos_++];
    std::string out;
    while (pos_ < text_.size() && text_[pos_] != quote && text_[pos_] != '\n') {
      if (text_[pos_] == '\\' && pos_ + 1 < text_.size()) {
        const char e = text_[pos_ + 1];
        out += e == 'n' ? '\n' : e == 't' ? '\t' : e;
        pos_ += 2;
      } else {
        out += text_[pos_++];
      }
    }
    if (pos_ >= text_.size() || text_[pos_] != quote) return std::nullopt;
    ++pos_;
    return out;
  }

  std::optional<Json> Number() {
    const std::size_t start = pos_;
    if (text_[pos_] == '-' || text_[pos_] == '+') ++pos_;
    std::string digits;
    bool real = false;
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (std::isdigit(static_cast<unsigned char>(c))) {
        digits += c;
      } else if (c == '.' || c == 'e' || c == 'E' || ((c == '-' || c == '+') && !digits.empty() && (digits.back() == 'e' || digits.back() == 'E'))) {
        real = true;
        digits += c;
      } else if (c != '_') {
        break;
      }
      ++pos_;
    }
    if (digits.empty() || !std::isdigit(static_cast<unsigned char>(digits.front()))) return std::nullopt;
    const bool negative = text_[start] == '-';
    if (real) {
      const Json parsed = Json::parse(digits, nullptr, false);
      if (parsed.is_discarded()) return std::nullopt;
      return negative ? Json(-parsed.get<double>()) : parsed;
    }
    if (digits.size() > 18) return std::nullopt;
    const std::int64_t value = std::stoll(digits);
    return Json(negative ? -value : value);
  }

  const std::string& text_;
  std::size_t pos_ = 0;
};

}  // namespace

Json ReadPythonLiterals(const std::string& text, std::vector<std::string>& computed) {
  return PythonLiterals(text).Read(computed);
}

}  // namespace bmpipe

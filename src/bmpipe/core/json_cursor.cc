#include "bmpipe/core/json_cursor.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace bmpipe {
namespace {

std::string TypeName(const Json& j) {
  if (j.is_null()) return "null";
  if (j.is_boolean()) return "a boolean";
  if (j.is_number()) return "a number";
  if (j.is_string()) return "a string";
  if (j.is_array()) return "a list";
  return "an object";
}

std::string Shown(const Json& j) {
  if (j.is_number_float() && !std::isfinite(j.get<double>())) {
    const double d = j.get<double>();
    return std::isnan(d) ? "nan" : (d > 0 ? "inf" : "-inf");
  }
  std::string s = j.dump();
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

}  // namespace

void JsonCursor::Fail(std::string_view what) const {
  throw internal::CursorFailure{fmt::format("{} = {}: {}", Where(), Shown(*value_), what)};
}

void JsonCursor::FailAt(std::string_view what) const {
  throw internal::CursorFailure{fmt::format("{}: {}", Where(), what)};
}

std::string JsonCursor::Where() const { return path_.empty() ? "top level" : path_; }

std::string JsonCursor::ChildPath(std::string_view key) const {
  return path_.empty() ? std::string(key) : fmt::format("{}.{}", path_, key);
}

void JsonCursor::ExpectObject() const {
  if (!value_->is_object()) Fail(fmt::format("expected an object (key: value pairs), found {}", TypeName(*value_)));
}

void JsonCursor::ExpectKeys(std::initializer_list<std::string_view> allowed) const {
  ExpectKeys(std::vector<std::string>(allowed.begin(), allowed.end()));
}

void JsonCursor::ExpectKeys(const std::vector<std::string>& names) const {
  ExpectObject();
  for (const auto& item : value_->items()) {
    if (std::find(names.begin(), names.end(), item.key()) != names.end()) continue;
    std::string known;
    for (const auto& n : names) known += (known.empty() ? "" : ", ") + n;
    throw internal::CursorFailure{fmt::format("{}: unknown key '{}'{}; the keys allowed here are: {}",
                                              Where(), item.key(),
                                              DidYouMean(item.key(), names), known)};
  }
}

bool JsonCursor::Has(std::string_view key) const {
  ExpectObject();
  return value_->contains(std::string(key));
}

JsonCursor JsonCursor::Required(std::string_view key, std::string_view what_it_is) const {
  ExpectObject();
  auto it = value_->find(std::string(key));
  if (it == value_->end()) {
    throw internal::CursorFailure{fmt::format("{}: missing required key '{}' ({})",
                                              Where(), key, what_it_is)};
  }
  return JsonCursor(*it, ChildPath(key));
}

std::optional<JsonCursor> JsonCursor::Optional(std::string_view key) const {
  ExpectObject();
  auto it = value_->find(std::string(key));
  if (it == value_->end() || it->is_null()) return std::nullopt;
  return JsonCursor(*it, ChildPath(key));
}

std::vector<JsonCursor> JsonCursor::Elements(bool allow_empty) const {
  if (!value_->is_array()) Fail(fmt::format("expected a list, found {}", TypeName(*value_)));
  if (value_->empty() && !allow_empty) Fail("the list is empty; give at least one entry");
  std::vector<JsonCursor> out;
  out.reserve(value_->size());
  for (std::size_t i = 0; i < value_->size(); ++i) {
    out.emplace_back((*value_)[i], fmt::format("{}[{}]", path_, i));
  }
  return out;
}

std::string JsonCursor::String() const {
  if (!value_->is_string()) Fail(fmt::format("expected a string, found {}", TypeName(*value_)));
  std::string s = value_->get<std::string>();
  if (s.empty()) Fail("must not be empty");
  return s;
}

bool JsonCursor::Bool() const {
  if (!value_->is_boolean()) Fail(fmt::format("expected true or false, found {}", TypeName(*value_)));
  return value_->get<bool>();
}

double JsonCursor::Number() const {
  if (!value_->is_number()) Fail(fmt::format("expected a number, found {}", TypeName(*value_)));
  double d = value_->get<double>();
  if (!std::isfinite(d)) Fail("must be a finite number");
  return d;
}

std::int64_t JsonCursor::Integer(std::int64_t min, std::int64_t max, std::string_view fix) const {
  double d = Number();
  if (d != std::floor(d)) Fail(fmt::format("must be a whole number; {}", fix));
  if (d < static_cast<double>(min) || d > static_cast<double>(max)) {
    Fail(fmt::format("must be between {} and {}; {}", min, max, fix));
  }
  return static_cast<std::int64_t>(d);
}

TimeNs JsonCursor::Seconds() const {
  double d = Number();
  if (d < 0) Fail("a time cannot be negative; give seconds >= 0");
  if (d > kMaxInputSeconds) Fail(fmt::format("more than {:g} s; is the unit seconds?", kMaxInputSeconds));
  return *CheckedNs(d);
}

Bytes JsonCursor::ByteCount() const {
  double d = Number();
  if (d < 0) Fail("a memory size cannot be negative; give bytes >= 0");
  if (d > kMaxInputBytes) Fail(fmt::format("more than {:g} bytes; is the unit bytes?", kMaxInputBytes));
  return *CheckedBytes(d);
}

std::size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string DidYouMean(std::string_view word, const std::vector<std::string>& candidates) {
  std::string best;
  std::size_t best_distance = std::max<std::size_t>(2, word.size() / 3) + 1;
  for (const auto& c : candidates) {
    std::size_t d = EditDistance(word, c);
    if (d < best_distance) {
      best_distance = d;
      best = c;
    }
  }
  return best.empty() ? "" : fmt::format("; did you mean '{}'?", best);
}

}  // namespace bmpipe

// Strict, path-aware reading of a parsed document. Every accessor names the key path of the value
// it reads ("layers[2].options[0].forward_s"), so messages can say where the problem is, what the
// value was and how to fix it. Unknown keys are errors, with the closest known key suggested.
//
// Reading code calls these accessors inside ReadDocument(), which turns the first failure into
// an Error; no exception leaves ReadDocument().
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bmpipe/core/document.h"
#include "bmpipe/core/error.h"
#include "bmpipe/core/units.h"

namespace bmpipe {

class JsonCursor {
 public:
  JsonCursor(const Json& value, std::string path) : value_(&value), path_(std::move(path)) {}

  const std::string& path() const { return path_; }
  const Json& json() const { return *value_; }

  // Objects. Keys() fails unless this is an object whose keys are all in `allowed`.
  void ExpectKeys(std::initializer_list<std::string_view> allowed) const;
  void ExpectKeys(const std::vector<std::string>& allowed) const;
  bool Has(std::string_view key) const;
  JsonCursor Required(std::string_view key, std::string_view what_it_is) const;
  std::optional<JsonCursor> Optional(std::string_view key) const;

  // Arrays. Fails unless this is a non-empty array (when `allow_empty` is false).
  std::vector<JsonCursor> Elements(bool allow_empty = false) const;

  // Scalars.
  std::string String() const;  // non-empty string
  bool Bool() const;
  std::int64_t Integer(std::int64_t min, std::int64_t max, std::string_view fix) const;
  double Number() const;  // any finite number
  // Non-negative finite seconds, rounded to the nearest nanosecond.
  TimeNs Seconds() const;
  // Non-negative finite byte count, rounded to the nearest byte.
  Bytes ByteCount() const;

  // Fails with "<path> = <value>: <what>".
  [[noreturn]] void Fail(std::string_view what) const;
  // Fails with "<path>: <what>" (for problems that concern the whole value, not its text).
  [[noreturn]] void FailAt(std::string_view what) const;

 private:
  std::string ChildPath(std::string_view key) const;
  std::string Where() const;
  void ExpectObject() const;

  const Json* value_;
  std::string path_;
};

// Runs `read` and returns its result, or the first failure of a JsonCursor inside it, with
// `source` (usually the file name) prefixed to the message.
template <typename T>
Result<T> ReadDocument(const std::string& source, const std::function<T()>& read);

// Levenshtein distance, for "did you mean" suggestions.
std::size_t EditDistance(std::string_view a, std::string_view b);

// Returns "; did you mean 'x'?" when one of `candidates` is close to `word`, else "".
std::string DidYouMean(std::string_view word, const std::vector<std::string>& candidates);

namespace internal {
struct CursorFailure {
  std::string message;
};
}  // namespace internal

template <typename T>
Result<T> ReadDocument(const std::string& source, const std::function<T()>& read) {
  try {
    return read();
  } catch (const internal::CursorFailure& failure) {
    return InvalidInput(source.empty() ? failure.message : source + ": " + failure.message);
  }
}

}  // namespace bmpipe

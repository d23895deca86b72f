// Errors and results returned by the library. The library never exits and never throws on
// user input: functions that can fail on input return Result<T> or Status.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace bmpipe {

enum class ErrorKind {
  kInvalidInput,  // the user's input is wrong; the message says where and how to fix it
  kIo,            // a file could not be read or written
  kTooLarge,      // the work does not fit the memory available; the message says which size to lower
  kInternal,      // a bug in bmpipe (an invariant did not hold)
};

struct Error {
  ErrorKind kind = ErrorKind::kInvalidInput;
  std::string message;
};

Error InvalidInput(std::string message);
Error IoError(std::string message);
Error TooLarge(std::string message);
Error InternalError(std::string message);

// Either a value or an Error.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}          // NOLINT: implicit by design
  Result(Error error) : v_(std::move(error)) {}      // NOLINT: implicit by design

  bool ok() const { return v_.index() == 0; }
  const T& value() const& { return std::get<0>(v_); }
  T& value() & { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  const Error& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

// Success or an Error.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error error) : error_(std::move(error)) {}  // NOLINT: implicit by design

  bool ok() const { return !error_.has_value(); }
  const Error& error() const { return *error_; }

 private:
  std::optional<Error> error_;
};

}  // namespace bmpipe

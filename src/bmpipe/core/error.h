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
  kStopped,       // a time limit or Ctrl-C ended the work before any result; the message says which
  kInternal,      // a bug in bmpipe (an invariant did not hold)
};

struct Error {
  ErrorKind kind = ErrorKind::kInvalidInput;
  std::string message;
};

Error InvalidInput(std::string message);
Error IoError(std::string message);
Error TooLarge(std::string message);
Error Stopped(std::string message);
Error InternalError(std::string message);

namespace internal {
// value() of a Result that holds an error: throws std::logic_error with the error's message (the
// command line reports it as a bug, with that message).
[[noreturn]] void ValueOfError(const Error& error);
// error() of a Result or Status that succeeded: throws std::logic_error.
[[noreturn]] void ErrorOfSuccess();
}  // namespace internal

// Either a value or an Error. value() is checked: reading it from an error is a bug, reported with
// the error's message.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}          // NOLINT: implicit by design
  Result(Error error) : v_(std::move(error)) {}      // NOLINT: implicit by design

  bool ok() const { return v_.index() == 0; }
  const T& value() const& {
    Check();
    return std::get<0>(v_);
  }
  T& value() & {
    Check();
    return std::get<0>(v_);
  }
  T&& value() && {
    Check();
    return std::get<0>(std::move(v_));
  }
  const Error& error() const {
    if (ok()) internal::ErrorOfSuccess();
    return std::get<1>(v_);
  }

 private:
  void Check() const {
    if (!ok()) internal::ValueOfError(std::get<1>(v_));
  }
  std::variant<T, Error> v_;
};

// Success or an Error.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error error) : error_(std::move(error)) {}  // NOLINT: implicit by design

  bool ok() const { return !error_.has_value(); }
  const Error& error() const {
    if (ok()) internal::ErrorOfSuccess();
    return *error_;
  }

 private:
  std::optional<Error> error_;
};

}  // namespace bmpipe

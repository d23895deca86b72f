#include "bmpipe/core/error.h"

#include <stdexcept>

#include "bmpipe/core/outcome.h"

namespace bmpipe {

Error InvalidInput(std::string message) { return {ErrorKind::kInvalidInput, std::move(message)}; }
Error IoError(std::string message) { return {ErrorKind::kIo, std::move(message)}; }
Error TooLarge(std::string message) { return {ErrorKind::kTooLarge, std::move(message)}; }
Error Stopped(std::string message) { return {ErrorKind::kStopped, std::move(message)}; }
Error InternalError(std::string message) { return {ErrorKind::kInternal, std::move(message)}; }

namespace internal {

void ValueOfError(const Error& error) {
  throw std::logic_error("the value of a result that failed was read (a bug in bmpipe): " + error.message);
}

void ErrorOfSuccess() { throw std::logic_error("the error of a call that succeeded was read (a bug in bmpipe)"); }

}  // namespace internal

std::string_view ModelStatusName(ModelStatus status) {
  switch (status) {
    case ModelStatus::kOptimal:
      return "optimal";
    case ModelStatus::kFeasible:
      return "feasible";
    case ModelStatus::kInfeasible:
      return "infeasible";
    case ModelStatus::kNoSolution:
      return "no plan found";
  }
  return "?";
}

}  // namespace bmpipe

#include "bmpipe/core/error.h"

namespace bmpipe {

Error InvalidInput(std::string message) { return {ErrorKind::kInvalidInput, std::move(message)}; }
Error IoError(std::string message) { return {ErrorKind::kIo, std::move(message)}; }
Error TooLarge(std::string message) { return {ErrorKind::kTooLarge, std::move(message)}; }
Error InternalError(std::string message) { return {ErrorKind::kInternal, std::move(message)}; }

}  // namespace bmpipe

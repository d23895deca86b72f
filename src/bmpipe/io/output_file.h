// Writing output files so that a failed run never leaves a partial file behind.
#pragma once

#include <string>

#include "bmpipe/core/error.h"

namespace bmpipe {

// Writes `content` to a temporary file beside `path` and renames it into place; on any failure
// the temporary file is removed and `path` is left as it was.
Status WriteFileAtomically(const std::string& path, const std::string& content);

}  // namespace bmpipe

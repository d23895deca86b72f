// Reading the explicit problem (profile) format (docs/file-formats.md, "Problem"), from JSON or YAML.
#pragma once

#include <string>
#include <vector>

#include "bmpipe/core/document.h"
#include "bmpipe/core/error.h"
#include "bmpipe/problem/problem.h"

namespace bmpipe {

// Converts a parsed document into a validated Problem. `source` prefixes messages (a file name).
// What is read but deprecated (old key names) is appended to `notes`, for the caller to show, also
// when the problem is refused.
Result<Problem> ReadProblem(const Json& doc, const std::string& source, std::vector<std::string>* notes = nullptr);

// Loads and validates the problem file at `path` (.json, .yaml or .yml).
Result<Problem> LoadProblem(const std::string& path, std::vector<std::string>* notes = nullptr);

}  // namespace bmpipe

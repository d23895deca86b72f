// Reading JSON and YAML documents into one tree (nlohmann::json), so that every input format has
// one validator. Duplicate keys are errors in both formats.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "bmpipe/core/error.h"

namespace bmpipe {

using Json = nlohmann::ordered_json;

// Parses `text` as JSON when `path` ends in .json, as YAML when it ends in .yaml or .yml, and
// otherwise by sniffing (a leading '{' or '[' means JSON). `path` is used in messages only.
Result<Json> ParseDocument(const std::string& text, const std::string& path);

// Reads the file at `path` and parses it as ParseDocument does.
Result<Json> LoadDocument(const std::string& path);

}  // namespace bmpipe

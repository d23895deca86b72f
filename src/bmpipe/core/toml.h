// Reading TOML documents (torchtitan's job configurations) into the tree JSON and YAML read into.
// The subset configuration files use: comments, [table] and [dotted.table] headers, key = value
// with bare, quoted and dotted keys, basic and literal strings, integers (decimal, 0x, 0o, 0b,
// with underscores), floats (inf and nan included), booleans, arrays (over lines, with a trailing
// comma) and inline tables. Multi-line strings, dates, times and arrays of tables are refused
// with the line that holds them, as is every redefinition of a key or table.
#pragma once

#include <string>

#include "bmpipe/core/document.h"
#include "bmpipe/core/error.h"

namespace bmpipe {

// Parses `text` (checked as CheckDocumentText checks every document; arrays and inline tables
// nest at most kMaxDocumentDepth deep). Messages name `path` and the line.
Result<Json> ParseToml(const std::string& text, const std::string& path);

// Whether `text` looks like a TOML document with a `[name]` table header on a line of its own.
bool HasTomlTable(const std::string& text, const std::string& name);

}  // namespace bmpipe

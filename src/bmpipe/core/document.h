// Reading JSON and YAML documents into one tree (nlohmann::json), so that every input format has
// one validator. Duplicate keys are errors in both formats.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "bmpipe/core/error.h"

namespace bmpipe {

using Json = nlohmann::ordered_json;

// What any document may hold (README, "Limits"): its text, how deep its lists and objects nest,
// and how many values it expands to (YAML aliases count every time they are used).
inline constexpr std::size_t kMaxDocumentBytes = std::size_t{64} << 20;
inline constexpr int kMaxDocumentDepth = 64;
inline constexpr std::size_t kMaxDocumentValues = 10'000'000;
// Text without aliases holds fewer values than bytes; YAML aliases may add this many more.
inline constexpr std::size_t kMaxAliasValues = 1'000'000;
// Seconds a pipe or device may stay silent before LoadDocument gives up on it.
inline constexpr int kMaxDocumentWaitSeconds = 60;

// The offset of the first byte of `text` that is not part of valid UTF-8 (overlong forms,
// surrogates and code points past U+10FFFF included), or std::string_view::npos.
std::size_t FirstInvalidUtf8(std::string_view text);

// Checks what every document's text must be: at most kMaxDocumentBytes of valid UTF-8 without
// NUL bytes. The message names `path`, and the line and column of a bad byte.
Status CheckDocumentText(const std::string& text, const std::string& path);

// Parses `text` as JSON when `path` ends in .json, as YAML when it ends in .yaml or .yml, and
// otherwise by sniffing (a leading '{' or '[' means JSON). `path` is used in messages only.
Result<Json> ParseDocument(const std::string& text, const std::string& path);

// Appends `value` under `key` to `object` (an object) without nlohmann's search for an existing
// key, which is linear in the object's size and so quadratic over a document; the caller knows
// the key is new (a hash set of the keys so far). Returns the member.
Json& AppendMember(Json& object, std::string key, Json value);

// `doc` as JSON text (`indent` as nlohmann's dump takes it). A string that is not UTF-8 (a file name
// given on the command line, say) is written with U+FFFD for its bad bytes instead of failing.
std::string DumpJson(const Json& doc, int indent = -1);

// Reads the file at `path` as LoadDocument does, without parsing it (the caller checks it with
// CheckDocumentText).
Result<std::string> LoadText(const std::string& path);

// Reads the file at `path` and parses it as ParseDocument does. Regular files are read whole (up to
// kMaxDocumentBytes); pipes and devices are read up to that size, waiting at most
// kMaxDocumentWaitSeconds for data, so a named pipe with no writer or /dev/zero cannot block or
// exhaust memory; directories are refused.
Result<Json> LoadDocument(const std::string& path);

}  // namespace bmpipe

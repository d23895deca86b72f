// TOML documents (core/toml.h: torchtitan's job configurations): any text is read or refused with
// a message naming the line; what is read is an object whose every array and table nests within
// the document limit.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "bmpipe/core/toml.h"
#include "fuzz_support.h"

using namespace bmpipe;

namespace {

int Depth(const Json& j) {
  int deepest = 0;
  if (j.is_array() || j.is_object()) {
    for (const Json& child : j) deepest = std::max(deepest, Depth(child));
    return deepest + 1;
  }
  return 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text = fuzz::AsText(data, size);
  const Result<Json> doc = ParseToml(text, "job.toml");
  if (!doc.ok()) {
    if (doc.error().message.rfind("job.toml: ", 0) != 0) fuzz::Violation("a refusal that names no file: " + doc.error().message);
    return 0;
  }
  if (!doc.value().is_object()) fuzz::Violation("a document that is not a table");
  // Arrays and inline tables nest at most kMaxDocumentDepth deep, each dotted key part once more.
  if (Depth(doc.value()) > 3 * kMaxDocumentDepth) fuzz::Violation("a document nested past the limit");
  (void)doc.value().dump();
  return 0;
}

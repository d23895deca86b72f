// ParseDocument (core/document.h), the one parser under every reader, on the input as JSON and as
// YAML. Whatever it accepts must be writable back out: plan and problem files are JSON dumps.
#include <cstddef>
#include <cstdint>

#include "bmpipe/core/document.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text = bmpipe::fuzz::AsText(data, size);
  for (const char* path : {"input.json", "input.yaml"}) {
    bmpipe::Result<bmpipe::Json> doc = bmpipe::ParseDocument(text, path);
    if (doc.ok()) (void)doc.value().dump();
  }
  return 0;
}

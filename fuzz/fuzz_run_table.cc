// The published-runs table reader (validate/validate.h; data/published-runs.yaml's format),
// which also reads inline Hugging Face configs and device presets.
#include <cstddef>
#include <cstdint>

#include "bmpipe/validate/validate.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  bmpipe::Result<bmpipe::Json> doc = bmpipe::ParseDocument(bmpipe::fuzz::AsText(data, size), "runs.yaml");
  if (!doc.ok()) return 0;
  (void)bmpipe::ReadRunTable(doc.value(), "runs.yaml");
  return 0;
}

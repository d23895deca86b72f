// The Hugging Face config.json reader (model/model.h), then the parameter count every report of
// a model prints.
#include <cstddef>
#include <cstdint>

#include "bmpipe/model/model.h"
#include "fuzz_support.h"

using namespace bmpipe;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Result<Json> doc = ParseDocument(fuzz::AsText(data, size), "config.json");
  if (!doc.ok()) return 0;
  Result<ModelSpec> model = ReadHuggingFaceConfig(doc.value(), "config.json");
  if (!model.ok()) return 0;
  (void)CountParameters(model.value());
  return 0;
}

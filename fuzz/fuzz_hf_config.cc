// The Hugging Face config.json reader (model/model.h), then the parameter count every report of
// a model prints and the cost model's problem for it (every layer kind's op graph, hybrid blocks
// included) on one device, where the setup suits the model.
#include <cstddef>
#include <cstdint>

#include "bmpipe/cost/problem_builder.h"
#include "bmpipe/model/model.h"
#include "fuzz_support.h"

using namespace bmpipe;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Result<Json> doc = ParseDocument(fuzz::AsText(data, size), "config.json");
  if (!doc.ok()) return 0;
  Result<ModelSpec> model = ReadHuggingFaceConfig(doc.value(), "config.json");
  if (!model.ok()) return 0;
  (void)CountParameters(model.value());
  static const DeviceSpec device = DevicePreset("h100-80gb").value();
  TrainingSetup setup;
  setup.seq = 4096;
  setup.flash_attention = true;
  if (model.value().layers <= 1000) (void)BuildProblem(model.value(), device, setup);
  return 0;
}

// The PyTorch profiler trace reader (io/torch_trace.h, `bmpipe profile`): ranges, backward
// functions, kernels and memory events in any order, nesting and shape.
#include <cstddef>
#include <cstdint>

#include "bmpipe/frameworks/torch/profiler_trace.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  bmpipe::Result<bmpipe::Json> doc = bmpipe::ParseDocument(bmpipe::fuzz::AsText(data, size), "trace.json");
  if (!doc.ok()) return 0;
  static const bmpipe::Problem base = bmpipe::TraceBaseProblem(2, 1, 4, "1f1b", 80e9, 0, 0).value();
  (void)bmpipe::ProblemFromTraces({{"none", "trace.json", doc.value()}}, base, 12);
  return 0;
}

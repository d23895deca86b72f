// The training setup read from a launcher's file (--setup-from; ReadLauncherSetup, frameworks/
// formats.h): Megatron-LM arguments, detected as `simulate --plan` detects them. A file is read or
// refused with a message; what the reader states must be keywords the cost model's option table
// takes as they are (the values the command line itself would accept), so that --setup-from never
// fails after reading a file it accepted.
#include <cstddef>
#include <cstdint>

#include "bmpipe/app/model.h"
#include "bmpipe/frameworks/formats.h"
#include "fuzz_support.h"

using namespace bmpipe;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text = fuzz::AsText(data, size);
  const Result<LauncherSetup> read = ReadLauncherSetup(text, "launcher.args");
  if (!read.ok()) {
    if (read.error().message.empty()) fuzz::Violation("a refusal without a message");
    return 0;
  }
  app::ModelRequest request;
  OptionTable table;
  app::AddModelOptions(table, request, "--problem");
  Json keywords = read.value().keywords;
  keywords.erase("recompute_num_layers");  // simulate's own option
  const Status applied = ReadOptions(table, keywords, "--setup-from");
  if (!applied.ok()) fuzz::Violation("a setup the reader stated is refused by the option table: " + applied.error().message);
  return 0;
}

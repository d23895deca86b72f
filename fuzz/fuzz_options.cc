// ReadOptions (core/options.h): any document as the keywords of every command's option table, as
// the Python package passes them. Whatever is read sets fields of the command's request and
// nothing else; a bad keyword, type or value is an input error naming it.
#include <cstddef>
#include <cstdint>

#include "bmpipe/app/command.h"
#include "bmpipe/core/document.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text = bmpipe::fuzz::AsText(data, size);
  bmpipe::Result<bmpipe::Json> doc = bmpipe::ParseDocument(text, "keywords.json");
  if (!doc.ok()) return 0;
  for (const bmpipe::app::Command& command : bmpipe::app::Commands()) {
    const std::unique_ptr<bmpipe::app::Invocation> invocation = command.make();
    const bmpipe::Status read = bmpipe::ReadOptions(invocation->options(), doc.value(), std::string(command.name));
    if (!read.ok() && read.error().kind != bmpipe::ErrorKind::kInvalidInput) __builtin_trap();
  }
  return 0;
}

// Device files (hardware/device.h), JSON or YAML. The reader only takes a path, so the input goes
// through a scratch file.
#include <cstddef>
#include <cstdint>

#include "bmpipe/hardware/device.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = bmpipe::fuzz::WriteScratchFile(data, size, "device");
  (void)bmpipe::LoadDeviceFile(path);
  return 0;
}

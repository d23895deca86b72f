#include "bmpipe/io/output_file.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

namespace bmpipe {

Status WriteFileAtomically(const std::string& path, const std::string& content) {
  const std::string temporary = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out) return IoError(path + ": cannot create the file (" + std::strerror(errno) + "); check the directory");
    out << content;
    out.flush();
    if (!out) {
      std::remove(temporary.c_str());
      return IoError(path + ": error while writing the file");
    }
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    const std::string reason = std::strerror(errno);
    std::remove(temporary.c_str());
    return IoError(path + ": cannot write the file (" + reason + ")");
  }
  return {};
}

}  // namespace bmpipe

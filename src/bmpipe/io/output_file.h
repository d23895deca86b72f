// Writing output files so that a failed run never leaves a file behind, and no planted link or
// special file can redirect or corrupt a write.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "bmpipe/core/error.h"

namespace bmpipe {

// Writes `content` to `path` at once:
//  - a regular file (or a new name, or a link to a regular file) is replaced atomically: the text
//    goes to a temporary file created exclusively beside it, under a name no other user can
//    predict (so a link planted there cannot redirect the write), then is renamed into place;
//  - anything else, a named pipe, a terminal, /dev/stdout, or "-" (standard output), is written
//    to directly; a pipe with no reader is an error, not a wait.
// On failure nothing at `path` has changed and no temporary file is left.
Status WriteFileAtomically(const std::string& path, const std::string& content);

// The files one command writes, all or none: each is staged while the command works, and written
// only when Commit() is called, after everything else succeeded. Every regular file is written to
// its temporary first; only when all of them are written are they renamed into place.
class OutputFiles {
 public:
  // Stages `content` for `path`; staging the same path again replaces its content.
  void Add(const std::string& path, std::string content);
  bool empty() const { return files_.empty(); }
  Status Commit();

 private:
  std::vector<std::pair<std::string, std::string>> files_;
};

}  // namespace bmpipe

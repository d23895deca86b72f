// Shared by the libFuzzer harnesses (fuzz/README in the top-level README's "Fuzzing"): the input
// as text, a file for readers that only take a path, fixed problems for the plan readers, and a
// property check that aborts so libFuzzer records the input.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "bmpipe/core/document.h"
#include "bmpipe/problem/problem.h"
#include "bmpipe/problem/problem_reader.h"

namespace bmpipe::fuzz {

inline std::string AsText(const std::uint8_t* data, std::size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

// Writes the input to this process's scratch file and returns its path. The name has no
// extension, so LoadDocument sniffs JSON ('{' or '[' first) or YAML as it does for any file.
inline std::string WriteScratchFile(const std::uint8_t* data, std::size_t size, const char* harness) {
  const char* dir = std::getenv("TMPDIR");
  const std::string path = std::string(dir && *dir ? dir : "/tmp") + "/bmpipe-" + harness + "-" +
                           std::to_string(static_cast<long>(getpid()));
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) {
    std::perror(path.c_str());
    std::abort();
  }
  if (size > 0 && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
  return path;
}

// A property of the library does not hold: say which and abort (a finding, like a crash).
[[noreturn]] inline void Violation(const std::string& what) {
  std::fprintf(stderr, "PROPERTY VIOLATED: %s\n", what.c_str());
  __builtin_trap();
}

// A problem from known-good text (the harness's fixed input) whose "%s" is `pipeline`; aborts if it
// does not read.
inline Problem FixedProblem(std::string text, const std::string& pipeline, const char* name) {
  text.replace(text.find("%s"), 2, pipeline);
  Result<Json> doc = ParseDocument(text, name);
  if (!doc.ok()) Violation(doc.error().message);
  Result<Problem> problem = ReadProblem(doc.value(), name);
  if (!problem.ok()) Violation(problem.error().message);
  return problem.value();
}

}  // namespace bmpipe::fuzz

// The problem `bmpipe plan` runs with no --problem: the MindFormers pipeline-balance tool's demo
// (examples/mindformers-demo/problem.yaml, compiled in).
#pragma once

#include <string>

namespace bmpipe {

const std::string& BuiltinExampleName();  // "examples/mindformers-demo/problem.yaml (built in)"
const std::string& BuiltinExampleText();  // its YAML

}  // namespace bmpipe

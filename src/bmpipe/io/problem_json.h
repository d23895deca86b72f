// The explicit problem file (docs/file-formats.md, "Problem"), written: what `bmpipe plan --dump-problem` saves so a
// case built by the cost model can be re-run, shared or edited by hand. Runs of identical
// consecutive layers become one entry with `repeat`; reading the file back gives the same
// Problem (times are whole nanoseconds, written as seconds that round back to them).
#pragma once

#include <string>

#include "bmpipe/core/document.h"
#include "bmpipe/problem/problem.h"

namespace bmpipe {

Json ProblemToJson(const Problem& problem, const std::string& description);

// ProblemToJson, dumped with two-space indentation and a final newline.
std::string ProblemJsonText(const Problem& problem, const std::string& description);

}  // namespace bmpipe

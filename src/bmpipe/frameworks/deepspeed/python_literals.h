// The top-level `NAME = <literal>` assignments of a Python module as a JSON object: ints, floats,
// strings, True/False/None, lists, tuples and dicts with string keys, across lines inside brackets,
// with '#' comments. Nothing is executed; other statements (imports, classes, functions,
// assignments of expressions) are skipped, and a name assigned an expression is recorded in
// `computed` so that reading it says so. What bmpipe reads of the DeepSpeed module it writes.
#pragma once

#include <string>
#include <vector>

#include "bmpipe/core/document.h"

namespace bmpipe {

Json ReadPythonLiterals(const std::string& text, std::vector<std::string>& computed);

}  // namespace bmpipe

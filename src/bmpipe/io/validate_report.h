// `bmpipe validate` output: the calibration, one row per measurement (predicted against measured)
// and the error summaries, as a text report, as the Markdown of docs/fidelity.md, or as JSON.
#pragma once

#include <string>

#include "bmpipe/core/document.h"
#include "bmpipe/validate/validate.h"

namespace bmpipe {

std::string FormatValidation(const RunTable& table, const Validation& v);
std::string ValidationMarkdown(const RunTable& table, const Validation& v);
Json ValidationToJson(const RunTable& table, const Validation& v);

}  // namespace bmpipe

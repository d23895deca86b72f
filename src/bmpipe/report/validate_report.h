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

// `bmpipe calibrate`'s report: the efficiencies fitted, and each run's measurements with the
// predictions before and after; the same as JSON; and the device file with the fitted values
// (a preset with `based_on` and the fitted `efficiency` keys).
std::string FormatCalibration(const RunTable& table, const DeviceCalibration& c);
Json CalibrationToJson(const RunTable& table, const DeviceCalibration& c);
std::string CalibratedDeviceYaml(const RunTable& table, const DeviceCalibration& c);

}  // namespace bmpipe

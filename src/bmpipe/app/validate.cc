// bmpipe validate and bmpipe calibrate: the cost model against measured runs, and a device's
// efficiencies fitted to them.
#include "bmpipe/app/commands.h"
#include "bmpipe/core/document.h"
#include "bmpipe/app/common.h"
#include "bmpipe/app/invocation.h"
#include "bmpipe/report/validate_report.h"
#include "bmpipe/validate/validate.h"

namespace bmpipe::app {
namespace {

struct ValidateRequest {
  std::string table;
  bool json = false;
  bool markdown = false;
  std::string out;
};

OptionTable ValidateOptions(ValidateRequest& r) {
  OptionTable t;
  t.Add("--table", "table", &r.table, "A run table in the same format instead of the built-in one");
  t.Add("--json", "", &r.json,
        "Print JSON: the calibration, the summaries, and every run with its source, what it states and what is "
        "assumed");
  t.Add("--markdown", "", &r.markdown, "Print the Markdown tables of docs/fidelity.md");
  t.Add("--out", "", &r.out, "Also write the JSON to this file");
  return t;
}

Result<Output> RunValidate(const ValidateRequest& r, const Context&) {
  if (r.json && r.markdown) return InvalidInput("give --json or --markdown, not both");
  Result<RunTable> table = LoadRunTable(r.table);
  if (!table.ok()) return table.error();
  Result<Validation> v = Validate(table.value());
  if (!v.ok()) return v.error();
  return Emit({}, r.out, r.json, DumpJson(ValidationToJson(table.value(), v.value()), 2) + "\n",
              r.markdown ? ValidationMarkdown(table.value(), v.value()) : FormatValidation(table.value(), v.value()));
}

struct CalibrateRequest {
  std::string runs;
  std::vector<std::string> fit;
  std::string device_out;
  bool json = false;
  std::string out;
};

OptionTable CalibrateOptions(CalibrateRequest& r) {
  OptionTable t;
  t.Add("--runs", "runs", &r.runs, "The measured runs (JSON or YAML)").Required();
  t.Add("--fit", "fit", &r.fit,
        "The efficiencies to fit, one or two: gemm, attention, memory, link, fp8_gemm, or a host wait (moe_host_ms, "
        "fp8_host_ms, ...)")
      .CommaSeparated()
      .Required();
  t.Add("--device-out", "", &r.device_out, "Write the device file (YAML) here instead of printing it");
  t.Add("--json", "", &r.json, "Print JSON: the fitted values and every measurement before and after");
  t.Add("--out", "", &r.out, "Also write the JSON to this file");
  return t;
}

Result<Output> RunCalibrate(const CalibrateRequest& r, const Context&) {
  Result<RunTable> table = LoadRunTable(r.runs);
  if (!table.ok()) return table.error();
  Result<DeviceCalibration> c = CalibrateDevice(table.value(), r.fit);
  if (!c.ok()) return c.error();
  Files files;
  std::string report = FormatCalibration(table.value(), c.value());
  const std::string device_file = CalibratedDeviceYaml(table.value(), c.value());
  if (!r.device_out.empty()) {
    files.push_back({r.device_out, device_file});
    report += "\ndevice file written to " + r.device_out + " (use it as --device " + r.device_out + ")\n";
  } else {
    report += "\n" + device_file;
  }
  Output o = Emit(std::move(files), r.out, r.json, DumpJson(CalibrationToJson(table.value(), c.value()), 2) + "\n", report);
  o.extras.push_back({"device_file", device_file});
  return o;
}

}  // namespace

Command ValidateCommand() {
  return MakeCommand<ValidateRequest, ValidateOptions, RunValidate>(
      "validate",
      "Check the analytic cost model against published training runs (data/published-runs.yaml, built in): fit the "
      "device efficiencies on the named calibration runs only, then predict every run's iteration time and memory "
      "with Megatron's plan for its configuration, and print predicted against measured, the error of each, and "
      "the mean and largest error over the held-out runs. docs/fidelity.md shows the result.");
}

Command CalibrateCommand() {
  return MakeCommand<CalibrateRequest, CalibrateOptions, RunCalibrate>(
      "calibrate",
      "Fit a device preset's efficiencies to your own measured runs, and write a device file with them: the runs "
      "(iteration time, TFLOP/s or MFU, peak memory, layer times) in the format of the built-in table of published "
      "runs (data/published-runs.yaml; the `calibration` section is not needed), all on one device preset. Each "
          "run's time is predicted with Megatron's plan for its configuration; one or two efficiencies are fitted by a "
          "joint grid search (docs/fidelity.md, \"Calibration\"). Prints each measurement against the prediction "
          "before and after.");
}

}  // namespace bmpipe::app

// bmpipe validate and bmpipe calibrate: the cost model against measured runs, and a device's
// efficiencies fitted to them.
#include <fmt/format.h>

#include "bmpipe/app/commands.h"
#include "bmpipe/core/document.h"
#include "bmpipe/app/common.h"
#include "bmpipe/app/invocation.h"
#include "bmpipe/report/validate_report.h"
#include "bmpipe/validate/validate.h"

namespace bmpipe::app {
namespace {

// The default of --time-limit: the built-in table validates in 3 s, a calibration of two
// efficiencies on a handful of ordinary runs in under one.
constexpr double kFitTimeLimitS = 300;

FitOptions FitOptionsOf(double seconds, const std::string& progress, std::string_view command, const Context& context) {
  FitOptions o;
  o.progress = context.Progress(command, progress);  // also lets Ctrl-C stop the fit rather than the process
  o.deadline = context.stop.Earlier(Deadline::In(seconds));
  o.name = fmt::format("--time-limit {:g} s", seconds);
  if (context.stopped_by) o.stopped_by = context.stopped_by;
  return o;
}

// --time-limit and --progress of a command that fits efficiencies (validate, calibrate).
void AddFitOptions(OptionTable& t, double& time_limit_s, std::string& progress, const std::string& what) {
  t.Add("--time-limit", "time_limit", &time_limit_s,
        "Seconds " + what + "; a fit that cannot end in time is refused at once, one stopped by it or by Ctrl-C ends "
        "with exit 5")
      .Positive()
      .ShowDefault();
  AddProgressOption(t, progress);
}

struct ValidateRequest {
  std::string table;
  double time_limit_s = kFitTimeLimitS;
  std::string progress = "auto";
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
  AddFitOptions(t, r.time_limit_s, r.progress, "the fits may take (each predicts every run of its entry about 10,000 times)");
  return t;
}

Result<Output> RunValidate(const ValidateRequest& r, const Context& context) {
  if (r.json && r.markdown) return InvalidInput("give --json or --markdown, not both");
  Result<RunTable> table = LoadRunTable(r.table);
  if (!table.ok()) return table.error();
  Result<Validation> v = Validate(table.value(), FitOptionsOf(r.time_limit_s, r.progress, "validate", context));
  if (!v.ok()) return v.error();
  return Emit({}, r.out, r.json, DumpJson(ValidationToJson(table.value(), v.value()), 2) + "\n",
              r.markdown ? ValidationMarkdown(table.value(), v.value()) : FormatValidation(table.value(), v.value()));
}

struct CalibrateRequest {
  std::string runs;
  double time_limit_s = kFitTimeLimitS;
  std::string progress = "auto";
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
  AddFitOptions(t, r.time_limit_s, r.progress,
                "the fit may take (a grid of about 120 evaluations for one efficiency, 10,000 for two, each predicting "
                "every run)");
  return t;
}

Result<Output> RunCalibrate(const CalibrateRequest& r, const Context& context) {
  Result<RunTable> table = LoadRunTable(r.runs);
  if (!table.ok()) return table.error();
  Result<DeviceCalibration> c =
      CalibrateDevice(table.value(), r.fit, FitOptionsOf(r.time_limit_s, r.progress, "calibrate", context));
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

#include "bmpipe/report/validate_report.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace bmpipe {
namespace {

std::string Value(Quantity q, double v) {
  if (!IsTime(q)) return fmt::format("{:.1f} GiB", v / (1024.0 * 1024.0 * 1024.0));
  if (v < 1) return fmt::format("{:.2f} ms", v * 1e3);
  return fmt::format("{:.2f} s", v);
}

std::string Layout(const TrainingSetup& s) {
  std::string out = fmt::format("tp{} pp{}", s.tp, s.pp);
  if (s.cp > 1) out += fmt::format(" cp{}", s.cp);
  out += fmt::format(" dp{}", s.dp);
  if (s.ep > 1) out += fmt::format(" ep{}", s.ep);
  if (s.etp > 0 && s.etp != s.tp) out += fmt::format(" etp{}", s.etp);
  if (s.vpp > 1) out += fmt::format(" vpp{}", s.vpp);
  return out + fmt::format(" mbs{} gbs{}", s.micro_batch_size, s.global_batch_size);
}

// The switches beyond the layout: recomputation, precision, state and sharding.
std::string Switches(const TrainingSetup& s) {
  std::string out = s.recompute.front();
  if (s.sequence_parallel) out += ", SP";
  if (s.flash_attention) out += ", flash";
  if (ZeroStage(s) == 1) out += ", dist. opt.";
  if (ZeroStage(s) >= 2) out += fmt::format(", ZeRO-{}", ZeroStage(s));
  if (IsQuantized(s.precision)) out += fmt::format(s.fp8_params ? ", {} weights" : ", {}", PrecisionLabel(s.precision));
  if (s.no_fp8_transpose_cache) out += ", no FP8 transpose cache";
  if (s.grad_dtype == StateDtype::kBf16) out += ", bf16 grads";
  if (s.optimizer_dtype == StateDtype::kBf16) out += ", bf16 moments";
  if (s.offload_optimizer) out += s.offload_keeps_master ? ", moments offload" : ", optimizer offload";
  if (s.moe_dispatcher == MoeDispatcher::kFlex) out += ", flex dispatcher";
  if (s.ep_comm_overlap > 0) out += fmt::format(", EP overlap {:g}", s.ep_comm_overlap);
  if (s.moe_cuda_graphs) out += ", MoE CUDA graphs";
  return out;
}

std::string KindsOf(const PublishedRun& run) { return fmt::format("{}", fmt::join(RunKinds(run), ", ")); }

std::string Measurements(int n) { return fmt::format("{} measurement{}", n, n == 1 ? "" : "s"); }

std::string Percent(double e) { return fmt::format("{:+.1f} %", 100 * e); }

std::string EfficiencyLine(const FittedDevice& f) {
  std::vector<std::string> parts;
  for (const std::string& name : f.fit) {
    parts.push_back(fmt::format("{} {:.3f} (from {:.3f})", name, EfficiencyOf(f.after, name), EfficiencyOf(f.before, name)));
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

std::string SummaryLine(const ErrorSummary& s) {
  if (s.count == 0) return "none";
  return fmt::format("{}, mean |error| {:.1f} %, max {:.1f} % ({}), bias {:+.1f} %", Measurements(s.count),
                     100 * s.mean_abs, 100 * s.max_abs, s.worst, 100 * s.mean);
}

// Every row of the table: the run's columns, then the measurement's.
template <typename Row>
void ForEachRow(const Validation& v, Row row) {
  for (const RunOutcome& o : v.outcomes) {
    for (std::size_t i = 0; i < o.run->measured.size(); ++i) row(o, o.run->measured[i], o.predicted[i]);
  }
}

// After a prediction: `mark` where the model predicts the run does not fit; for another
// framework's run, that Megatron's execution of it would not.
std::string FitMark(const RunOutcome& o, const char* mark) {
  if (o.fits) return "";
  return o.run->framework.empty() ? mark : " (not in Megatron)";
}

// Which runs the model predicts do not fit, though they ran; and, apart, what Megatron's execution
// of other frameworks' runs would need, which is no verdict on those runs.
std::string FitParagraph(const Validation& v) {
  std::string out = "\n";
  if (!v.other_frameworks_not_fitting.empty()) {
    std::vector<std::string> runs;
    for (std::size_t i : v.other_frameworks_not_fitting) {
      const RunOutcome& o = v.outcomes[i];
      runs.push_back(fmt::format("{} ({}: {:.1f} GB on the fullest rank, of {:.1f} GB)", o.run->id, o.run->framework,
                                 ToGigabytes(o.peak_bytes),
                                 ToGigabytes(o.run->device.memory_bytes)));
    }
    out += fmt::format(
        "Runs of other frameworks are compared for time only: their own schedule and memory management ran them, so "
        "their fit is not judged. Megatron's execution of their layout would not fit: {}.\n",
        fmt::join(runs, "; "));
  }
  const char* every = v.other_frameworks_not_fitting.empty() ? "Every run" : "Every other run";
  out += v.not_fitting.empty()
             ? fmt::format("{} is predicted to fit in memory (each of them ran).\n", every)
             : fmt::format("Predicted not to fit, though each of them ran: {}.\n", fmt::join(v.not_fitting, ", "));
  return out;
}

}  // namespace

std::string FormatValidation(const RunTable& table, const Validation& v) {
  std::string out = fmt::format("bmpipe validate: {} ({} runs)\n\n", table.source, table.runs.size());
  out += "Calibration (device efficiencies fitted on these runs only; every other run is held out)\n";
  for (const FittedDevice& f : v.fitted) {
    out += fmt::format("  {:<11} {} on {}: {}\n", f.device, EfficiencyLine(f), Measurements(f.measurements),
                       fmt::join(f.runs, ", "));
  }
  out += "\n";
  std::size_t id_width = 3, stated_width = 9;
  ForEachRow(v, [&](const RunOutcome& o, const Measurement& m, double) {
    id_width = std::max(id_width, o.run->id.size());
    stated_width = std::max(stated_width, m.stated.size());
  });
  out += fmt::format("{:<{}}  {:<11} {:<32} {:<14} {:<{}} {:>11} {:>11} {:>8}  {}\n", "run", id_width, "device",
                     "layout", "quantity", "as stated", stated_width, "measured", "predicted", "error", "role");
  ForEachRow(v, [&](const RunOutcome& o, const Measurement& m, double predicted) {
    out += fmt::format("{:<{}}  {:<11} {:<32} {:<14} {:<{}} {:>11} {:>11} {:>8}  {}{}\n", o.run->id, id_width,
                       o.run->device.name, Layout(o.run->setup), QuantityName(m.quantity), m.stated, stated_width,
                       Value(m.quantity, m.value), Value(m.quantity, predicted),
                       Percent(RelativeError(predicted, m.value)), o.calibration ? "calibration" : "held out",
                       FitMark(o, " (does not fit by the model)"));
  });
  out += "\n";
  out += "Held-out time:    " + SummaryLine(v.held_out_time) + "\n";
  out += "Held-out memory:  " + SummaryLine(v.held_out_memory) + "\n";
  out += "Calibration fit:  " + SummaryLine(v.calibration) + "\n";
  out += "\nHeld out, by kind of setup (a run counts in each kind it exercises)\n";
  for (const KindSummary& k : v.held_out_by_kind) {
    out += fmt::format("  {:<8} {:>3} run{}  time: {}\n", k.kind, k.runs, k.runs == 1 ? " " : "s", SummaryLine(k.time));
    out += fmt::format("  {:<8}              memory: {}\n", "", SummaryLine(k.memory));
  }
  for (auto [title, groups] : {std::pair{"model family", &v.held_out_by_family}, std::pair{"device", &v.held_out_by_device}}) {
    out += fmt::format("\nHeld out, by {} (time)\n", title);
    for (const KindSummary& k : *groups) {
      if (k.time.count == 0) continue;
      out += fmt::format("  {:<12} {:>3} run{}  {}\n", k.kind, k.runs, k.runs == 1 ? " " : "s", SummaryLine(k.time));
    }
  }
  out += FitParagraph(v);
  out += "\nEvery run's source, what it states and what is assumed: bmpipe validate --json, or the table file.\n";
  return out;
}

std::string ValidationMarkdown(const RunTable& table, const Validation& v) {
  std::string out = fmt::format("Table: `{}`, {} runs.\n\n", table.source, table.runs.size());
  out += "| device | fitted on | efficiencies |\n|---|---|---|\n";
  for (const FittedDevice& f : v.fitted) {
    out += fmt::format("| {} | {} ({}) | {} |\n", f.device, fmt::join(f.runs, ", "), Measurements(f.measurements),
                       EfficiencyLine(f));
  }
  out += "\n| summary | measurements | mean abs error | max abs error (run) | bias (mean error) |\n";
  out += "|---|---|---|---|---|\n";
  auto summary = [&](const char* name, const ErrorSummary& s) {
    out += fmt::format("| {} | {} | {:.1f} % | {:.1f} % ({}) | {:+.1f} % |\n", name, s.count, 100 * s.mean_abs,
                       100 * s.max_abs, s.worst, 100 * s.mean);
  };
  summary("held-out iteration time", v.held_out_time);
  summary("held-out memory", v.held_out_memory);
  summary("calibration", v.calibration);
  out += "\nHeld out, by kind of setup (a run counts in each kind it exercises):\n\n";
  out += "| kind | runs | time: measurements | mean abs error | max (run) | bias | memory: measurements | mean abs "
         "error | max (run) | bias |\n";
  out += "|---|---|---|---|---|---|---|---|---|---|\n";
  auto cells = [](const ErrorSummary& s) -> std::string {
    if (s.count == 0) return "0 | | | ";
    return fmt::format("{} | {:.1f} % | {:.1f} % ({}) | {:+.1f} %", s.count, 100 * s.mean_abs, 100 * s.max_abs,
                       s.worst, 100 * s.mean);
  };
  for (const KindSummary& k : v.held_out_by_kind) {
    out += fmt::format("| {} | {} | {} | {} |\n", k.kind, k.runs, cells(k.time), cells(k.memory));
  }
  for (auto [title, groups] : {std::pair{"model family", &v.held_out_by_family}, std::pair{"device", &v.held_out_by_device}}) {
    out += fmt::format("\nHeld out, by {}:\n\n| {} | runs | time: measurements | mean abs error | max (run) | bias | "
                       "memory: measurements | mean abs error | max (run) | bias |\n",
                       title, title);
    out += "|---|---|---|---|---|---|---|---|---|---|\n";
    for (const KindSummary& k : *groups) {
      out += fmt::format("| {} | {} | {} | {} |\n", k.kind, k.runs, cells(k.time), cells(k.memory));
    }
  }
  out += FitParagraph(v);
  out += "\n| run | kind | device | layout | setup | quantity | as stated | measured | predicted | error | role |\n";
  out += "|---|---|---|---|---|---|---|---|---|---|---|\n";
  ForEachRow(v, [&](const RunOutcome& o, const Measurement& m, double predicted) {
    const TrainingSetup& s = o.run->setup;
    out += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {}{} | {} | {} |\n", o.run->id, KindsOf(*o.run),
                       o.run->device.name, Layout(s), Switches(s), QuantityName(m.quantity), m.stated,
                       Value(m.quantity, m.value), Value(m.quantity, predicted), FitMark(o, " (does not fit)"),
                       Percent(RelativeError(predicted, m.value)), o.calibration ? "calibration" : "held out");
  });
  return out;
}

Json ValidationToJson(const RunTable& table, const Validation& v) {
  Json out = Json::object();
  out["table"] = table.source;
  Json fitted = Json::array();
  for (const FittedDevice& f : v.fitted) {
    auto eff = [](const Efficiencies& e) {
      return Json{{"gemm", e.gemm}, {"attention", e.attention}, {"memory", e.memory}, {"link", e.link}};
    };
    fitted.push_back({{"device", f.device}, {"fit", f.fit}, {"runs", f.runs}, {"measurements", f.measurements},
                      {"before", eff(f.before)}, {"after", eff(f.after)}});
  }
  out["calibration"] = std::move(fitted);
  auto summary = [](const ErrorSummary& s) {
    return Json{{"count", s.count},
                {"mean_abs_error", s.mean_abs},
                {"max_abs_error", s.max_abs},
                {"worst", s.worst},
                {"mean_error", s.mean}};
  };
  out["held_out_time"] = summary(v.held_out_time);
  out["held_out_memory"] = summary(v.held_out_memory);
  out["calibration_fit"] = summary(v.calibration);
  Json kinds = Json::array();
  for (const KindSummary& k : v.held_out_by_kind) {
    kinds.push_back({{"kind", k.kind}, {"runs", k.runs}, {"time", summary(k.time)}, {"memory", summary(k.memory)}});
  }
  out["held_out_by_kind"] = std::move(kinds);
  for (auto [key, groups] : {std::pair{"held_out_by_family", &v.held_out_by_family},
                             std::pair{"held_out_by_device", &v.held_out_by_device}}) {
    Json list = Json::array();
    for (const KindSummary& k : *groups) {
      list.push_back({{"name", k.kind}, {"runs", k.runs}, {"time", summary(k.time)}, {"memory", summary(k.memory)}});
    }
    out[key] = std::move(list);
  }
  out["not_fitting"] = v.not_fitting;
  Json others = Json::array();
  for (std::size_t i : v.other_frameworks_not_fitting) others.push_back(v.outcomes[i].run->id);
  out["other_frameworks_not_fitting"] = std::move(others);
  Json runs = Json::array();
  for (const RunOutcome& o : v.outcomes) {
    const PublishedRun& r = *o.run;
    const TrainingSetup& s = r.setup;
    Json measured = Json::array();
    for (std::size_t i = 0; i < r.measured.size(); ++i) {
      const Measurement& m = r.measured[i];
      measured.push_back({{"quantity", QuantityName(m.quantity)},
                          {"stated", m.stated},
                          {"measured", m.value},
                          {"predicted", o.predicted[i]},
                          {"error", RelativeError(o.predicted[i], m.value)}});
    }
    runs.push_back({{"id", r.id},
                    {"role", o.calibration ? "calibration" : "held out"},
                    {"kinds", RunKinds(r)},
                    {"source", r.source},
                    {"states", r.states},
                    {"assumes", r.assumes},
                    {"framework", r.framework.empty() ? "megatron" : r.framework},
                    {"model", r.model_json},
                    {"device", r.device.name},
                    {"setup",
                     {{"tp", s.tp},
                      {"pp", s.pp},
                      {"dp", s.dp},
                      {"vpp", s.vpp},
                      {"mbs", s.micro_batch_size},
                      {"gbs", s.global_batch_size},
                      {"seq", s.seq},
                      {"recompute", s.recompute.front()},
                      {"sequence_parallel", s.sequence_parallel},
                      {"flash_attention", s.flash_attention},
                      {"distributed_optimizer", s.distributed_optimizer},
                      {"cp", s.cp},
                      {"ep", s.ep},
                      {"etp", ExpertTensorParallel(s)},
                      {"zero", ZeroStage(s)},
                      {"precision", PrecisionName(s.precision)},
                      {"fp8_params", s.fp8_params},
                      {"no_fp8_transpose_cache", s.no_fp8_transpose_cache},
                      {"grad_dtype", StateDtypeName(s.grad_dtype)},
                      {"optimizer_dtype", StateDtypeName(s.optimizer_dtype)},
                      {"tp_comm_overlap", s.tp_comm_overlap},
                      {"offload_optimizer", s.offload_optimizer},
                      {"offload_keeps_master", s.offload_keeps_master},
                      {"moe_dispatcher", MoeDispatcherName(s.moe_dispatcher)},
                      {"ep_comm_overlap", s.ep_comm_overlap},
                      {"moe_cuda_graphs", s.moe_cuda_graphs},
                      {"dp_overlap", s.dp_overlap}}},
                    {"megatron", o.flags},
                    {"fits_memory", o.fits},
                    {"measured", std::move(measured)}});
  }
  out["runs"] = std::move(runs);
  return out;
}

namespace {

std::string FittedValues(const DeviceCalibration& c, const Efficiencies& e) {
  std::vector<std::string> parts;
  for (const std::string& name : c.fit) parts.push_back(fmt::format("{} {:.3f}", name, EfficiencyOf(e, name)));
  return fmt::format("{}", fmt::join(parts, ", "));
}

}  // namespace

std::string FormatCalibration(const RunTable& table, const DeviceCalibration& c) {
  std::string out = fmt::format("bmpipe calibrate: {} on {} run{} of {}\n", c.device.name, table.runs.size(),
                                table.runs.size() == 1 ? "" : "s", table.source);
  out += fmt::format("  fitted     {} (before: {})\n\n", FittedValues(c, c.device.efficiency), FittedValues(c, c.before));
  out += fmt::format("{:<28} {:<12} {:>12} {:>22} {:>22}\n", "run", "quantity", "measured", "predicted before",
                     "predicted after");
  for (std::size_t i = 0; i < table.runs.size(); ++i) {
    const PublishedRun& run = table.runs[i];
    for (std::size_t k = 0; k < run.measured.size(); ++k) {
      const Measurement& m = run.measured[k];
      const double before = c.before_outcomes[i].predicted[k], after = c.after_outcomes[i].predicted[k];
      out += fmt::format("{:<28} {:<12} {:>12} {:>12} {:>9} {:>12} {:>9}\n", run.id, QuantityName(m.quantity),
                         Value(m.quantity, m.value), Value(m.quantity, before), Percent(RelativeError(before, m.value)),
                         Value(m.quantity, after), Percent(RelativeError(after, m.value)));
    }
  }
  return out;
}

Json CalibrationToJson(const RunTable& table, const DeviceCalibration& c) {
  Json doc;
  doc["device"] = c.device.name;
  doc["source"] = table.source;
  for (const std::string& name : c.fit) {
    doc["fitted"][name] = EfficiencyOf(c.device.efficiency, name);
    doc["preset"][name] = EfficiencyOf(c.before, name);
  }
  doc["runs"] = Json::array();
  for (std::size_t i = 0; i < table.runs.size(); ++i) {
    const PublishedRun& run = table.runs[i];
    for (std::size_t k = 0; k < run.measured.size(); ++k) {
      const Measurement& m = run.measured[k];
      doc["runs"].push_back({{"id", run.id},
                             {"quantity", QuantityName(m.quantity)},
                             {"measured", m.value},
                             {"predicted_before", c.before_outcomes[i].predicted[k]},
                             {"predicted_after", c.after_outcomes[i].predicted[k]}});
    }
  }
  return doc;
}

std::string CalibratedDeviceYaml(const RunTable& table, const DeviceCalibration& c) {
  std::string out = fmt::format("# bmpipe calibrate: {} of {} fitted to the runs of {}\n",
                                fmt::join(c.fit, " and "), c.device.name, table.source);
  out += "# Use it as --device FILE (docs/cost-model.md, \"Devices\").\n";
  if (!DevicePreset(c.device.name).ok()) {
    // The runs' device came from a device file: every figure, the fitted ones replaced.
    DeviceSpec device = c.device;
    if (device.name.find("(calibrated)") == std::string::npos) device.name += " (calibrated)";
    return out + DeviceFileText(device);
  }
  out += fmt::format("name: {} (calibrated)\nbased_on: {}\nefficiency:\n", c.device.name, c.device.name);
  for (const std::string& name : c.fit) out += fmt::format("  {}: {:.3f}\n", name, EfficiencyOf(c.device.efficiency, name));
  return out;
}

}  // namespace bmpipe

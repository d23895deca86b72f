#include "bmpipe/validate/validate.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "bmpipe/core/json_cursor.h"
#include "bmpipe/problem/recompute.h"
#include "bmpipe/cost/problem_builder.h"
#include "bmpipe/cost/setup_reader.h"
#include "bmpipe/frameworks/formats.h"
#include "bmpipe/sim/simulator.h"

namespace bmpipe {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// The field of Efficiencies named `name` (one of EfficiencyNames()).
const EfficiencyField& FieldOf(const std::string& name) {
  const std::vector<EfficiencyField>& fields = EfficiencyFields();
  return *std::find_if(fields.begin(), fields.end(), [&](const EfficiencyField& f) { return f.name == name; });
}

double& EfficiencyOf(Efficiencies& e, const std::string& name) { return e.*FieldOf(name).member; }

const std::vector<std::string>& EfficiencyNames() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const EfficiencyField& f : EfficiencyFields()) out.push_back(f.name);
    return out;
  }();
  return names;
}

// FLOPs of one iteration by the formulas sources use to state TFLOP/s (Narayanan et al. 2021,
// eq. 3): 96 B s l h² (1 + s/(6h) + V/(16 l h)) with full recomputation counted, 72 without.
double MegatronFormulaFlops(const ModelSpec& m, const TrainingSetup& s, double coefficient) {
  const double b = s.global_batch_size, seq = s.seq, l = m.layers, h = m.hidden, v = m.vocab;
  return coefficient * b * seq * l * h * h * (1 + seq / (6 * h) + v / (16 * l * h));
}

// Each run is simulated, and each calibration run once per point of the fit's grid.
constexpr std::size_t kMaxRuns = 1000;
constexpr std::size_t kMaxCalibrationRuns = 100;

double Devices(const TrainingSetup& s) { return static_cast<double>(s.tp) * s.pp * s.cp * s.dp; }

// A path of the run table, relative to its directory; a failure without one (the table is no file).
std::string TablePath(const JsonCursor& c, const std::string& path, const std::optional<std::string>& files_dir) {
  if (!files_dir) {
    c.Fail(fmt::format("'{}' is no preset, and this table is not a file, so paths are not read; give a preset name "
                       "or an inline config, or load the table from a file",
                       path));
  }
  const std::filesystem::path p(path);
  return p.is_absolute() || files_dir->empty() ? path : (std::filesystem::path(*files_dir) / p).string();
}

// A name with a path separator or a file ending (.json, .yaml, .yml) names a file; any other a preset.
bool LooksLikePath(const std::string& name) {
  const std::string ext = std::filesystem::path(name).extension().string();
  return name.find('/') != std::string::npos || ext == ".json" || ext == ".yaml" || ext == ".yml";
}

bool IsModelPreset(const std::string& name) {
  const std::vector<std::string> presets = ModelPresetNames();
  return std::find(presets.begin(), presets.end(), name) != presets.end();
}

ModelSpec ReadModel(const JsonCursor& c, std::string& name, const std::optional<std::string>& files_dir) {
  if (c.json().is_string()) {
    name = c.String();
    if (IsModelPreset(name) || !LooksLikePath(name)) {
      Result<ModelSpec> preset = ModelPreset(name);
      if (!preset.ok()) c.Fail(preset.error().message);
      return preset.value();
    }
    Result<ModelSpec> model = LoadModel(TablePath(c, name, files_dir));
    if (!model.ok()) c.Fail(model.error().message);
    return model.value();
  }
  Result<ModelSpec> model = ReadHuggingFaceConfig(c.json(), c.path());
  if (!model.ok()) c.FailAt(model.error().message);
  const JsonCursor type = c.Required("model_type", "");
  name = "inline " + type.String() + " config";
  return model.value();
}

// A count of the setup, within the bounds the cost model takes (training_setup.h).
std::vector<Measurement> ReadMeasured(const JsonCursor& m, const ModelSpec& model, const DeviceSpec& device,
                                      const TrainingSetup& setup) {
  m.ExpectKeys({"iteration_time_s", "tflops_per_gpu", "flops", "mfu", "samples_per_gpu_per_s", "tokens_per_gpu_per_s",
                "layer_forward_ms", "layer_backward_ms", "memory_gib", "memory_gb", "memory_reserved_gib",
                "memory_reserved_gb"});
  std::vector<Measurement> out;
  auto positive = [](const JsonCursor& c) {
    const double v = c.Number();
    if (!(v > 0)) c.Fail("a measurement must be positive");
    return v;
  };
  const double devices = Devices(setup);
  if (auto v = m.Optional("layer_forward_ms")) {
    out.push_back({Quantity::kLayerForward, positive(*v) / 1e3, fmt::format("{} ms", v->Number())});
  }
  if (auto v = m.Optional("layer_backward_ms")) {
    out.push_back({Quantity::kLayerBackward, positive(*v) / 1e3, fmt::format("{} ms", v->Number())});
  }
  if (auto v = m.Optional("iteration_time_s")) {
    out.push_back({Quantity::kIterationTime, positive(*v), fmt::format("{} s per iteration", v->Number())});
  }
  std::optional<JsonCursor> flops = m.Optional("flops");
  if (auto v = m.Optional("tflops_per_gpu")) {
    if (!flops) v->FailAt("give `flops`: the FLOP count the source divides by: megatron-96 (full recomputation "
                          "counted), megatron-72 (without), model (bmpipe's model FLOPs, attention's whole square) or "
                          "model-causal (attention as the causal kernel runs it)");
    const std::string formula = flops->String();
    double count = 0;
    if (formula == "megatron-96") {
      count = MegatronFormulaFlops(model, setup, 96);
    } else if (formula == "megatron-72") {
      count = MegatronFormulaFlops(model, setup, 72);
    } else if (formula == "model") {
      count = ModelFlopsPerIteration(model, device, setup, AttentionFlops::kFull);
    } else if (formula == "model-causal") {
      count = ModelFlopsPerIteration(model, device, setup, AttentionFlops::kCausal);
    } else {
      flops->Fail("use megatron-96, megatron-72, model (attention's whole square) or model-causal (half of it, as "
                  "Megatron counts since 2025)");
    }
    const double tflops = positive(*v);
    out.push_back({Quantity::kIterationTime, count / (tflops * 1e12 * devices),
                   fmt::format("{} TFLOP/s per GPU ({} FLOPs)", tflops, formula)});
  } else if (flops) {
    flops->FailAt("`flops` belongs with tflops_per_gpu");
  }
  if (auto v = m.Optional("mfu")) {
    const double mfu = positive(*v);
    if (mfu > 1) v->Fail("MFU is a fraction of the peak, e.g. 0.41");
    out.push_back({Quantity::kIterationTime,
                   ModelFlopsPerIteration(model, device, setup, AttentionFlops::kFull) / (mfu * device.peak_flops * devices),
                   fmt::format("MFU {:.1f} %", 100 * mfu)});
  }
  if (auto v = m.Optional("samples_per_gpu_per_s")) {
    const double rate = positive(*v);
    out.push_back({Quantity::kIterationTime, setup.global_batch_size / (rate * devices),
                   fmt::format("{} samples/s per GPU", rate)});
  }
  if (auto v = m.Optional("tokens_per_gpu_per_s")) {
    const double rate = positive(*v);
    out.push_back({Quantity::kIterationTime,
                   static_cast<double>(setup.global_batch_size) * setup.seq / (rate * devices),
                   fmt::format("{} tokens/s per GPU", rate)});
  }
  if (auto v = m.Optional("memory_gib")) {
    out.push_back({Quantity::kPeakMemory, positive(*v) * kGiB, fmt::format("{} GiB", v->Number())});
  }
  if (auto v = m.Optional("memory_gb")) {
    out.push_back({Quantity::kPeakMemory, positive(*v) * kGigabyte, fmt::format("{} GB", v->Number())});
  }
  if (auto v = m.Optional("memory_reserved_gib")) {
    out.push_back({Quantity::kReservedMemory, positive(*v) * kGiB, fmt::format("{} GiB reserved", v->Number())});
  }
  if (auto v = m.Optional("memory_reserved_gb")) {
    out.push_back({Quantity::kReservedMemory, positive(*v) * kGigabyte, fmt::format("{} GB reserved", v->Number())});
  }
  if (out.empty()) m.FailAt("give at least one measurement");
  return out;
}

const std::vector<std::string>& RunKeys() {
  static const std::vector<std::string> keys = [] {
    std::vector<std::string> out = {"id",        "source",    "states",         "assumes", "model",
                                    "device",    "recompute", "recompute_num_layers", "offload_layers", "framework",
                                    "measured"};
    out.insert(out.end(), SetupFieldKeys().begin(), SetupFieldKeys().end());
    return out;
  }();
  return keys;
}

// A row's `setup_from`: the launcher file's settings (as --setup-from reads them) under the row's
// own keys, which win; `merged` holds the row that results. Without it, the row itself.
JsonCursor WithSetupFile(const JsonCursor& row, const std::optional<std::string>& files_dir, Json& merged) {
  const std::optional<JsonCursor> file = row.Optional("setup_from");
  if (!file) return row;
  const std::string path = TablePath(*file, file->String(), files_dir);
  Result<std::string> text = LoadText(path);
  if (!text.ok()) file->Fail(text.error().message);
  Result<LauncherSetup> read = ReadLauncherSetup(text.value(), path);
  if (!read.ok()) file->Fail(read.error().message);
  merged = row.json();
  merged.erase("setup_from");
  for (const auto& [key, why] : read.value().refused) {
    if (!merged.contains(key)) file->Fail(why + " (or give it as the row's key)");
  }
  const std::vector<std::string>& keys = RunKeys();
  for (const auto& [key, value] : read.value().keywords.items()) {
    if (merged.contains(key) || (key == "recompute_num_layers" && merged.contains("recompute"))) continue;
    if (key == "recompute") {
      if (value.size() != 1) file->Fail(fmt::format("states recompute {}; a run has one setting", value.dump()));
      merged["recompute"] = value[0];
    } else if (key == "offload") {
      for (const Json& what : value) {
        if (what == "optimizer" || what == "optimizer-moments") merged["offload_optimizer"] = true;
        if (what == "optimizer-moments") merged["offload_keeps_master"] = true;
        if (what == "activations") file->Fail("states activation offloading; give offload_layers in the row");
      }
    } else if ((key == "schedule" && value == "1f1b") || (key == "micro_batch_group" && value == 0)) {
      continue;  // the run table's own
    } else if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
      file->Fail(fmt::format("states {} {}, which a run table has no key for (a run is 1F1B or interleaved 1F1B with "
                             "Megatron's micro-batch groups)",
                             key, value.dump()));
    } else {
      merged[key] = value;
    }
  }
  if (read.value().local_batch > 0 && !merged.contains("gbs")) {
    // torchtitan's local batch on every data-parallel rank.
    if (!merged.contains("dp") || !merged["dp"].is_number_integer()) {
      file->Fail("states the local batch, not the global one; give dp (or gbs) in the row");
    }
    merged["gbs"] = read.value().local_batch * merged["dp"].get<std::int64_t>();
  }
  return JsonCursor(merged, row.path());
}

PublishedRun ReadRun(const JsonCursor& row, const std::optional<std::string>& files_dir) {
  Json merged;
  const JsonCursor c = WithSetupFile(row, files_dir, merged);
  c.ExpectKeys(RunKeys());
  PublishedRun run;
  run.id = c.Required("id", "a short unique name for the run").String();
  run.source = c.Required("source", "the citation: paper and table, or repository and file").String();
  run.states = c.Required("states", "what the source says about the configuration").String();
  if (auto a = c.Optional("assumes")) run.assumes = a->String();
  if (auto f = c.Optional("framework")) run.framework = f->String();
  const JsonCursor model =
      c.Required("model", "a model preset, the path of a Hugging Face config.json, or an inline config");
  run.model = ReadModel(model, run.model_name, files_dir);
  run.model_json = model.json();
  const JsonCursor device = c.Required("device", "a device preset or the path of a device file");
  const std::string device_name = device.String();
  const std::vector<std::string> devices = DevicePresetNames();
  const bool device_preset =
      std::find(devices.begin(), devices.end(), device_name) != devices.end() || !LooksLikePath(device_name);
  Result<DeviceSpec> preset =
      device_preset ? DevicePreset(device_name) : LoadDeviceFile(TablePath(device, device_name, files_dir));
  if (!preset.ok()) device.Fail(preset.error().message);
  run.device = preset.value();
  TrainingSetup& s = run.setup;
  ReadSetupFields(c, s);
  const JsonCursor recompute =
      c.Required("recompute", "none, selective, full, or the parts every decoder layer recomputes (e.g. norm+mlp_act)");
  const std::string option = recompute.String();
  const std::optional<GlobalRecompute> global = ParseGlobalRecompute(option);
  if (!global && !ParseRecompute(option).ok()) {
    recompute.Fail(fmt::format("use none, selective or full (Megatron's global settings), or parts joined by '+' "
                               "(Megatron's --recompute-modules): {}",
                               ParseRecompute(option).error().message));
  }
  // Parts other than Megatron's settings: the one option every decoder layer runs.
  run.recompute = global.value_or(GlobalRecompute::kNone);
  s.recompute = {option};
  if (auto n = c.Optional("recompute_num_layers")) {
    // Megatron's --recompute-method block: full recomputation of the first n layers of each stage.
    if (run.recompute != GlobalRecompute::kFull) n->Fail("applies to recompute full (Megatron's block method)");
    run.recompute_layers = static_cast<int>(n->Integer(1, run.model.layers, "decoder layers of each stage"));
    s.recompute = {"none", "full"};
  }
  if (auto n = c.Optional("offload_layers")) {
    run.offload_layers =
        static_cast<int>(n->Integer(1, run.model.layers, "the decoder layers whose activations are offloaded"));
    if (option != "none" || s.pp != 1) {
      n->Fail("Megatron's --cpu-offloading refuses recomputation and pipeline parallelism; give it with recompute none "
              "and pp 1");
    }
    s.offload_layers = run.offload_layers;
    s.recompute.push_back("offload");
  }
  const Status valid = ValidateSetup(run.model, run.device, s);
  if (!valid.ok()) c.FailAt(valid.error().message);
  run.measured = ReadMeasured(c.Required("measured", "what the source measured"), run.model, run.device, s);
  return run;
}

// `fitted`: per device, the efficiencies earlier entries fitted. A device may have several
// entries, each fitting other efficiencies on its own runs, from the fit before it.
Calibration ReadCalibration(const JsonCursor& c, const std::set<std::string>& ids,
                            const std::map<std::string, std::set<std::string>>& fitted) {
  c.ExpectKeys({"device", "fit", "start_from", "runs"});
  Calibration cal;
  const JsonCursor device = c.Required("device", "the device preset these runs calibrate");
  cal.device = device.String();
  if (!DevicePreset(cal.device).ok()) device.Fail(DevicePreset(cal.device).error().message);
  const auto earlier = fitted.find(cal.device);
  for (const JsonCursor& f : c.Required("fit", "the efficiencies to fit").Elements()) {
    const std::string name = f.String();
    const auto& names = EfficiencyNames();
    if (std::find(names.begin(), names.end(), name) == names.end()) {
      f.Fail(fmt::format("unknown efficiency; use {}{}", fmt::join(names, ", "), DidYouMean(name, names)));
    }
    if (std::find(cal.fit.begin(), cal.fit.end(), name) != cal.fit.end()) f.Fail("listed twice");
    if (earlier != fitted.end() && earlier->second.count(name)) {
      f.Fail("an earlier entry fits this efficiency of this device already");
    }
    cal.fit.push_back(name);
  }
  if (cal.fit.size() > 2) {
    c.Required("fit", "").FailAt("fit at most two efficiencies per entry (the fit is a joint grid search)");
  }
  if (auto s = c.Optional("start_from")) {
    cal.start_from = s->String();
    if (!fitted.count(cal.start_from)) s->Fail("name a device calibrated earlier in the list");
    if (earlier != fitted.end()) s->Fail("a later entry of a device starts from that device's fit");
  }
  const std::vector<JsonCursor> runs = c.Required("runs", "the ids of the calibration runs").Elements();
  if (runs.size() > kMaxCalibrationRuns) {
    c.Required("runs", "").FailAt(fmt::format("{} calibration runs; a device is fitted on at most {}", runs.size(),
                                              kMaxCalibrationRuns));
  }
  for (const JsonCursor& r : runs) {
    const std::string id = r.String();
    if (!ids.count(id)) r.Fail("no run has this id");
    cal.runs.push_back(id);
  }
  return cal;
}

RunTable ReadTable(const Json& doc, const std::string& source, const std::optional<std::string>& files_dir) {
  const JsonCursor root(doc, "");
  root.ExpectKeys({"calibration", "runs"});
  RunTable table;
  table.source = source;
  std::set<std::string> ids;
  const std::vector<JsonCursor> runs = root.Required("runs", "the published runs").Elements();
  if (runs.size() > kMaxRuns) {
    root.Required("runs", "").FailAt(fmt::format("{} runs; a table holds at most {}", runs.size(), kMaxRuns));
  }
  for (const JsonCursor& r : runs) {
    PublishedRun run = ReadRun(r, files_dir);
    if (!ids.insert(run.id).second) r.Required("id", "").Fail("two runs have this id");
    table.runs.push_back(std::move(run));
  }
  std::map<std::string, std::set<std::string>> fitted;
  const std::optional<JsonCursor> calibration = root.Optional("calibration");
  for (const JsonCursor& c : calibration ? calibration->Elements(true) : std::vector<JsonCursor>{}) {
    table.calibration.push_back(ReadCalibration(c, ids, fitted));
    const Calibration& cal = table.calibration.back();
    fitted[cal.device].insert(cal.fit.begin(), cal.fit.end());
  }
  for (const Calibration& cal : table.calibration) {
    for (const std::string& id : cal.runs) {
      for (const PublishedRun& run : table.runs) {
        if (run.id == id && run.device.name != cal.device) {
          root.FailAt(fmt::format("calibration of {} lists run '{}', which runs on {}", cal.device, id, run.device.name));
        }
      }
    }
  }
  return table;
}

// Predicts `run`'s measurements on `device`.
Result<RunOutcome> Predict(const PublishedRun& run, const DeviceSpec& device) {
  Result<Problem> problem = BuildProblem(run.model, device, run.setup);
  if (!problem.ok()) return problem.error();
  const Problem& pb = problem.value();
  Result<MegatronLaunch> launch = MegatronDefaultPlan(pb, run.recompute, run.recompute_layers);
  if (!launch.ok()) return launch.error();
  if (run.offload_layers > 0) {
    // The first decoder layers offload (the embedding is layer 0).
    int offloaded = 0;
    for (LayerIdx l = 1; l < pb.num_layers() && offloaded < run.offload_layers; ++l) {
      const std::vector<LayerOption>& options = pb.layers[l].options;
      for (OptionIdx o = 0; o < static_cast<OptionIdx>(options.size()); ++o) {
        if (options[o].name == "offload") {
          launch.value().plan.option[l] = o;
          ++offloaded;
        }
      }
    }
    if (offloaded < run.offload_layers) {
      return InvalidInput(fmt::format("offload_layers {}: only {} decoder layers have the offload option (the host "
                                      "memory holds no more)",
                                      run.offload_layers, offloaded));
    }
    launch.value().flags += fmt::format(", the first {} decoder layers' activations offloaded", offloaded);
  }
  Result<SimResult> sim = SimulatePlan(pb, launch.value().plan);
  if (!sim.ok()) return sim.error();
  RunOutcome out;
  out.run = &run;
  out.flags = launch.value().flags;
  out.fits = sim.value().fits;
  for (const RankResult& r : sim.value().ranks) out.peak_bytes = std::max(out.peak_bytes, r.peak_memory_bytes);
  // The first decoder layer: the embedding is layer 0.
  const LayerOption& layer = pb.layers[1].options[launch.value().plan.option[1]];
  for (const Measurement& m : run.measured) {
    switch (m.quantity) {
      case Quantity::kLayerForward:
        out.predicted.push_back(ToSeconds(layer.forward_ns));
        break;
      case Quantity::kLayerBackward:
        out.predicted.push_back(ToSeconds(layer.backward_ns + layer.recompute_ns));
        break;
      case Quantity::kIterationTime:
        out.predicted.push_back(ToSeconds(sim.value().iteration_ns));
        break;
      case Quantity::kPeakMemory:
        out.predicted.push_back(static_cast<double>(out.peak_bytes - pb.reserved_bytes));
        break;
      case Quantity::kReservedMemory:
        out.predicted.push_back(static_cast<double>(out.peak_bytes));
        break;
    }
  }
  return out;
}

// Sum of squared log errors of `runs` on `device`.
Result<double> Loss(const std::vector<const PublishedRun*>& runs, const DeviceSpec& device) {
  double loss = 0;
  for (const PublishedRun* run : runs) {
    Result<RunOutcome> o = Predict(*run, device);
    if (!o.ok()) return o.error();
    for (std::size_t i = 0; i < run->measured.size(); ++i) {
      const double e = std::log(o.value().predicted[i] / run->measured[i].value);
      loss += e * e;
    }
  }
  return loss;
}

// The range a fitted value is searched in: (0, 1] for an efficiency, (0, 10] for the host waits
// in milliseconds (the grid's steps scale with it).
double FitScale(const std::string& name) { return FieldOf(name).milliseconds ? 10 : 1; }

// A joint grid search over the fitted efficiencies (at most two; the roofline's max() makes the
// loss kinked, where coordinate descent stalls): every combination of [0.10, 1.00] by 0.01 for an
// efficiency, [0.1, 10] ms by 0.1 ms for a host wait (FitScale), then of the best +- one step by a
// tenth of it. Ties keep the first combination scanned.
// Each evaluation predicts every run (a simulation each): before the grid, the evaluations it
// needs times the measured cost of one are compared with the time left, and a fit that cannot end
// in it is refused at once; the grid looks at the deadline (and Ctrl-C) between evaluations.
Result<Efficiencies> Fit(const std::vector<const PublishedRun*>& runs, DeviceSpec device,
                         const std::vector<std::string>& fit, const FitOptions& limit) {
  const auto began = std::chrono::steady_clock::now();
  int evaluations = 0;
  // A value no run's prediction depends on cannot be fitted: the search would return whatever
  // its grid starts with.
  for (const std::string& name : fit) {
    DeviceSpec low = device, high = device;
    EfficiencyOf(low.efficiency, name) = 0.3 * FitScale(name);
    EfficiencyOf(high.efficiency, name) = 0.9 * FitScale(name);
    Result<double> a = Loss(runs, low);
    if (!a.ok()) return a.error();
    Result<double> b = Loss(runs, high);
    if (!b.ok()) return b.error();
    evaluations += 2;
    if (a.value() == b.value()) {
      std::vector<std::string> ids;
      for (const PublishedRun* run : runs) ids.push_back(run->id);
      return InvalidInput(fmt::format("--fit {}: no run of the fit exercises it (the predictions of {} do not change "
                                      "with it); fit it on runs that do ({}), or leave it at its value",
                                      name, ids.size() <= 5 ? fmt::format("{}", fmt::join(ids, ", "))
                                                             : fmt::format("{} runs", ids.size()),
                                      FieldOf(name).milliseconds ? "MoE runs for the MoE host waits, FP8 runs for "
                                                                   "fp8_host_ms"
                                                                 : "runs whose kernels it prices: FP8 GEMMs for "
                                                                   "fp8_gemm, FP4 for fp4_gemm, ..."));
    }
  }
  // Efficiencies from 0.10, host waits from 0.1 ms; then the best +- 10 steps of a tenth.
  std::vector<std::pair<int, int>> coarse;
  for (const std::string& name : fit) coarse.push_back({FitScale(name) > 1 ? 1 : 10, 100});
  double planned = 1, fine_points = 1;
  for (const auto& [lo, hi] : coarse) planned *= hi - lo + 1;
  for (std::size_t i = 0; i < fit.size(); ++i) fine_points *= 21;
  planned += fine_points;
  const double each_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count() / std::max(1, evaluations);
  const std::string runs_said = fmt::format("{} {}", runs.size(), runs.size() == 1 ? "run's" : "runs'");
  if (!limit.deadline.Expired() && planned * each_s > limit.deadline.SecondsLeft()) {
    return Stopped(fmt::format(
        "the fit of {} needs about {:.0f} s ({:.0f} evaluations of the {} predictions, {:.3g} s each), more than "
        "{} leaves; raise it, fit one efficiency at a time, or calibrate on runs with fewer micro-batches",
        fmt::join(fit, " and "), planned * each_s, planned, runs_said, each_s, limit.name));
  }
  int done = 0;
  auto grid = [&](const std::vector<std::pair<int, int>>& ranges, double unit) -> Status {
    std::vector<int> k;
    for (const auto& r : ranges) k.push_back(r.first);
    Efficiencies best = device.efficiency;
    double best_loss = -1;
    while (true) {
      bool valid = true;
      for (std::size_t i = 0; i < fit.size(); ++i) {
        const double scale = FitScale(fit[i]);
        const double value = k[i] * unit * scale;
        valid = valid && value > 0 && value <= scale;
        EfficiencyOf(device.efficiency, fit[i]) = value;
      }
      if (valid) {
        if (limit.deadline.Expired()) {
          return Stopped(fmt::format("the fit of {} was stopped by {} after {} of about {:.0f} evaluations of the "
                                     "{} predictions; nothing was fitted",
                                     fmt::join(fit, " and "), limit.deadline.Stopped() ? limit.stopped_by() : limit.name,
                                     done, planned, runs_said));
        }
        ++done;
        if (limit.progress) {
          Progress p{"fitting " + fmt::format("{}", fmt::join(fit, " and "))};
          p.done = done;
          p.total = static_cast<int>(planned);
          limit.progress(p);
        }
        Result<double> loss = Loss(runs, device);
        if (!loss.ok()) return loss.error();
        if (best_loss < 0 || loss.value() < best_loss) {
          best_loss = loss.value();
          best = device.efficiency;
        }
      }
      std::size_t i = 0;
      for (; i < k.size() && ++k[i] > ranges[i].second; ++i) k[i] = ranges[i].first;
      if (i == k.size()) break;
    }
    device.efficiency = best;
    return {};
  };
  Status s = grid(coarse, 0.01);
  if (!s.ok()) return s.error();
  std::vector<std::pair<int, int>> fine;
  for (const std::string& name : fit) {
    const int center = static_cast<int>(std::lround(EfficiencyOf(device.efficiency, name) / FitScale(name) * 1000));
    fine.push_back({center - 10, center + 10});
  }
  s = grid(fine, 0.001);
  if (!s.ok()) return s.error();
  return device.efficiency;
}

void Summarize(ErrorSummary& s, double error, const std::string& id) {
  const double a = std::abs(error);
  s.mean_abs = (s.mean_abs * s.count + a) / (s.count + 1);
  s.mean = (s.mean * s.count + error) / (s.count + 1);
  ++s.count;
  if (a > s.max_abs || s.count == 1) {
    s.max_abs = a;
    s.worst = id;
  }
}

}  // namespace

double EfficiencyOf(const Efficiencies& e, const std::string& name) { return e.*FieldOf(name).member; }

const std::vector<std::string>& AllRunKinds() {
  static const std::vector<std::string> kinds = {"dense", "moe", "hybrid", "cp", "fp8", "fp4", "sharded"};
  return kinds;
}

std::vector<std::string> SetupKinds(const ModelSpec& model, const TrainingSetup& s, int offload_layers) {
  std::vector<std::string> kinds;
  if (model.mamba.enabled() || model.deltanet.enabled()) kinds.push_back("hybrid");
  if (model.moe.enabled()) kinds.push_back("moe");
  if (s.cp > 1) kinds.push_back("cp");
  if (IsFp4(s.precision)) kinds.push_back("fp4");
  if (IsQuantized(s.precision) && !IsFp4(s.precision)) kinds.push_back("fp8");
  if (ZeroStage(s) >= 2 || s.grad_dtype != StateDtype::kFp32 || s.optimizer_dtype != StateDtype::kFp32 ||
      s.offload_optimizer || offload_layers > 0) {
    kinds.push_back("sharded");
  }
  if (kinds.empty()) kinds.push_back("dense");
  return kinds;
}

std::vector<std::string> RunKinds(const PublishedRun& run) { return SetupKinds(run.model, run.setup, run.offload_layers); }

const std::vector<HeldOutError>& BundledHeldOutErrors() {
  // `bmpipe validate`'s "Held out, by kind of setup" table (docs/fidelity.md).
  static const std::vector<HeldOutError> errors = {
      {"dense", 64, 17, 0.064, 0.037},
      {"moe", 12, 3, 0.132, 0.045},
      {"hybrid", 7, 0, 0.142, 0},
      {"cp", 8, 0, 0.111, 0},
      {"fp8", 30, 2, 0.100, 0.085},
      {"fp4", 2, 0, 0.114, 0},
      {"sharded", 25, 3, 0.110, 0.077},
  };
  return errors;
}

const std::vector<HeldOutError>& BundledHeldOutErrorsByDevice() {
  // `bmpipe validate`'s "Held out, by device" table (docs/fidelity.md), time only.
  static const std::vector<HeldOutError> errors = {
      {"a100-80gb", 60, 0, 0.053, 0}, {"b200-180gb", 3, 0, 0.116, 0}, {"b300-288gb", 1, 0, 0.247, 0},
      {"gb200", 7, 0, 0.112, 0},      {"gb300", 4, 0, 0.188, 0},      {"h100-80gb", 23, 0, 0.088, 0},
  };
  return errors;
}

double MemoryUncertainty(const ModelSpec& model, const TrainingSetup& setup) {
  double error = 0;
  for (const std::string& kind : SetupKinds(model, setup)) {
    for (const HeldOutError& e : BundledHeldOutErrors()) {
      if (e.kind == kind && e.memory_count > 0) error = std::max(error, e.memory_mean_abs);
    }
  }
  return error;
}

std::string PredictionUncertainty(const ModelSpec& model, const TrainingSetup& setup, const std::string& device) {
  const HeldOutError* time = nullptr;
  const HeldOutError* memory = nullptr;
  for (const std::string& kind : SetupKinds(model, setup)) {
    for (const HeldOutError& e : BundledHeldOutErrors()) {
      if (e.kind != kind) continue;
      if (e.time_count > 0 && (!time || e.time_mean_abs > time->time_mean_abs)) time = &e;
      if (e.memory_count > 0 && (!memory || e.memory_mean_abs > memory->memory_mean_abs)) memory = &e;
    }
  }
  auto part = [](const char* what, double error, const std::string& kind, int count) {
    return fmt::format("±{:.1f} % {} ({}, {} held out)", 100 * error, what, kind, count);
  };
  std::vector<std::string> parts;
  if (time) parts.push_back(part("time", time->time_mean_abs, time->kind, time->time_count));
  if (memory) parts.push_back(part("memory", memory->memory_mean_abs, memory->kind, memory->memory_count));
  if (!device.empty()) {
    const auto& by_device = BundledHeldOutErrorsByDevice();
    auto it = std::find_if(by_device.begin(), by_device.end(), [&](const HeldOutError& e) { return e.kind == device; });
    if (it == by_device.end()) {
      parts.push_back(fmt::format("no held-out run on {}", device));
    } else if (!time || it->time_mean_abs > time->time_mean_abs) {
      parts.push_back(part("time", it->time_mean_abs, "on " + device, it->time_count));
    }
  }
  if (parts.empty()) return "no held-out published run of this kind (docs/fidelity.md)";
  return fmt::format("{}: mean |error| on published runs not fitted on (docs/fidelity.md)", fmt::join(parts, ", "));
}

std::string QuantityName(Quantity q) {
  switch (q) {
    case Quantity::kLayerForward:
      return "layer forward";
    case Quantity::kLayerBackward:
      return "layer backward";
    case Quantity::kIterationTime:
      return "iteration";
    case Quantity::kPeakMemory:
      return "memory";
    case Quantity::kReservedMemory:
      return "memory reserved";
  }
  return "";
}

bool IsTime(Quantity q) { return q != Quantity::kPeakMemory && q != Quantity::kReservedMemory; }

Result<RunTable> ReadRunTable(const Json& doc, const std::string& source, const std::optional<std::string>& files_dir) {
  return ReadDocument<RunTable>(source, [&] { return ReadTable(doc, source, files_dir); });
}

Result<RunTable> LoadRunTable(const std::string& path) {
  Result<Json> doc = path.empty() ? ParseDocument(BundledRunTableText(), "published-runs.yaml") : LoadDocument(path);
  if (!doc.ok()) return doc.error();
  if (path.empty()) return ReadRunTable(doc.value(), "data/published-runs.yaml (built in)");
  return ReadRunTable(doc.value(), path, std::filesystem::path(path).parent_path().string());
}

Result<Validation> Validate(const RunTable& table, const FitOptions& limit) {
  Validation v;
  std::map<std::string, Efficiencies> fitted;
  std::set<std::string> calibration_ids;
  for (const Calibration& cal : table.calibration) {
    // The fit starts from the uncalibrated defaults (or another device's fit), not from the
    // preset, whose efficiencies are this fit's result.
    DeviceSpec device = DevicePreset(cal.device).value();
    if (fitted.count(cal.device)) {
      device.efficiency = fitted.at(cal.device);  // a later entry of the device
    } else {
      device.efficiency = cal.start_from.empty() ? Efficiencies{} : fitted.at(cal.start_from);
    }
    std::vector<const PublishedRun*> runs;
    FittedDevice f{cal.device, device.efficiency, device.efficiency, cal.fit, cal.runs, 0};
    for (const std::string& id : cal.runs) {
      for (const PublishedRun& run : table.runs) {
        if (run.id != id) continue;
        runs.push_back(&run);
        f.measurements += static_cast<int>(run.measured.size());
      }
      calibration_ids.insert(id);
    }
    Result<Efficiencies> e = Fit(runs, device, cal.fit, limit);
    if (!e.ok()) return e.error();
    f.after = e.value();
    fitted[cal.device] = f.after;
    v.fitted.push_back(f);
  }
  std::map<std::string, KindSummary> by_kind, by_family, by_device;
  for (const PublishedRun& run : table.runs) {
    DeviceSpec device = run.device;
    auto it = fitted.find(device.name);
    if (it != fitted.end()) device.efficiency = it->second;
    Result<RunOutcome> o = Predict(run, device);
    if (!o.ok()) return InvalidInput(fmt::format("{}: run '{}': {}", table.source, run.id, o.error().message));
    RunOutcome& out = o.value();
    out.calibration = calibration_ids.count(run.id) > 0;
    // A run timed by single layers ran those layers, not necessarily the whole model.
    const bool whole_run = std::any_of(run.measured.begin(), run.measured.end(), [](const Measurement& m) {
      return m.quantity == Quantity::kIterationTime || !IsTime(m.quantity);
    });
    if (!out.fits && whole_run && run.framework.empty()) v.not_fitting.push_back(run.id);
    if (!out.fits && !run.framework.empty()) v.other_frameworks_not_fitting.push_back(v.outcomes.size());
    const std::vector<std::string> kinds = RunKinds(run);
    KindSummary& family = by_family[run.model.family];
    KindSummary& on_device = by_device[run.device.name];
    if (!out.calibration) {
      for (const std::string& kind : kinds) ++by_kind[kind].runs;
      ++family.runs;
      ++on_device.runs;
    }
    for (std::size_t i = 0; i < run.measured.size(); ++i) {
      const double e = RelativeError(out.predicted[i], run.measured[i].value);
      const bool time = IsTime(run.measured[i].quantity);
      if (out.calibration) {
        Summarize(v.calibration, e, run.id);
        continue;
      }
      Summarize(time ? v.held_out_time : v.held_out_memory, e, run.id);
      for (const std::string& kind : kinds) Summarize(time ? by_kind[kind].time : by_kind[kind].memory, e, run.id);
      Summarize(time ? family.time : family.memory, e, run.id);
      Summarize(time ? on_device.time : on_device.memory, e, run.id);
    }
    v.outcomes.push_back(std::move(out));
  }
  for (const std::string& kind : AllRunKinds()) {
    auto it = by_kind.find(kind);
    if (it == by_kind.end()) continue;
    it->second.kind = kind;
    v.held_out_by_kind.push_back(it->second);
  }
  for (auto [groups, into] : {std::pair{&by_family, &v.held_out_by_family}, std::pair{&by_device, &v.held_out_by_device}}) {
    for (auto& [name, summary] : *groups) {
      if (summary.runs == 0) continue;  // calibration runs only
      summary.kind = name;
      into->push_back(summary);
    }
  }
  return v;
}

Result<DeviceCalibration> CalibrateDevice(const RunTable& table, const std::vector<std::string>& fit,
                                          const FitOptions& limit) {
  if (table.runs.empty()) return InvalidInput(table.source + ": no runs to calibrate on");
  const std::string& name = table.runs.front().device.name;
  for (const PublishedRun& run : table.runs) {
    if (run.device.name != name) {
      return InvalidInput(fmt::format("{}: run '{}' is on {}, run '{}' on {}; calibrate one device at a time (a file "
                                      "of its runs)",
                                      table.source, table.runs.front().id, name, run.id, run.device.name));
    }
  }
  const std::vector<std::string>& names = EfficiencyNames();
  if (fit.empty() || fit.size() > 2) {
    return InvalidInput(fmt::format("--fit: give one or two efficiencies to fit (a joint grid search): {}",
                                    fmt::join(names, ", ")));
  }
  for (const std::string& f : fit) {
    if (std::find(names.begin(), names.end(), f) == names.end()) {
      return InvalidInput(fmt::format("--fit {}: unknown efficiency{}; use {}", f, DidYouMean(f, names), fmt::join(names, ", ")));
    }
    if (std::count(fit.begin(), fit.end(), f) > 1) return InvalidInput(fmt::format("--fit {}: listed twice", f));
  }
  DeviceCalibration cal;
  cal.fit = fit;
  cal.device = table.runs.front().device;  // a preset, or the runs' device file
  cal.before = cal.device.efficiency;
  std::vector<const PublishedRun*> runs;
  for (const PublishedRun& run : table.runs) {
    runs.push_back(&run);
    Result<RunOutcome> o = Predict(run, cal.device);
    if (!o.ok()) return InvalidInput(fmt::format("{}: run '{}': {}", table.source, run.id, o.error().message));
    cal.before_outcomes.push_back(o.value());
  }
  Result<Efficiencies> fitted = Fit(runs, cal.device, fit, limit);
  if (!fitted.ok()) return fitted.error();
  cal.device.efficiency = fitted.value();
  for (const PublishedRun& run : table.runs) cal.after_outcomes.push_back(Predict(run, cal.device).value());
  return cal;
}

}  // namespace bmpipe

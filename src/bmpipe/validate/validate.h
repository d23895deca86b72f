// Fidelity of the analytic cost model: published training runs, each evaluated with Megatron-LM's
// plan for its configuration (MegatronDefaultPlan) and the simulator, against what its source
// measured.
//
// The device efficiencies (hardware/device.h) are the model's only free constants. They are fitted
// on a named calibration subset of the runs, per device, by minimizing the sum of squared log
// errors; every other run is held out, and no run has constants of its own.
//
// The run table (data/published-runs.yaml, compiled in; docs/fidelity.md describes the format)
// gives, per run: the source, what it states and what is assumed, the model (a preset or an
// inline Hugging Face config), the device, the parallel layout, batch, sequence and the global
// recomputation setting, and the measurements. Throughput measurements become iteration times
// with the source's own FLOP count; memory is the fullest rank's peak without the framework's
// reserve.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "bmpipe/frameworks/megatron/megatron.h"
#include "bmpipe/core/deadline.h"
#include "bmpipe/core/document.h"
#include "bmpipe/core/progress.h"
#include "bmpipe/cost/training_setup.h"

namespace bmpipe {

enum class Quantity {
  kLayerForward,   // one decoder layer's forward, seconds
  kLayerBackward,  // one decoder layer's backward including its recomputation, seconds
  kIterationTime,  // seconds
  kPeakMemory,     // the fullest rank's peak allocated (torch's max_memory_allocated), bytes
  // The fullest rank's peak as the device reads it (nvidia-smi, torch's max_memory_reserved with
  // the CUDA context): the allocated peak and the framework reserve (the allocator's cache and
  // fragmentation, the CUDA context, NCCL buffers, workspaces), bytes.
  kReservedMemory,
};
std::string QuantityName(Quantity q);  // "layer forward", "iteration", "memory", "memory reserved", ...
bool IsTime(Quantity q);

struct Measurement {
  Quantity quantity = Quantity::kIterationTime;
  double value = 0;    // seconds or bytes
  std::string stated;  // as the source states it: "148 TFLOP/s per GPU (96BslH² FLOPs)"
};

struct PublishedRun {
  std::string id;
  std::string source;   // citation
  std::string states;   // what the source says about the configuration
  std::string assumes;  // what is filled in, and why
  // Empty for runs of Megatron-LM, Megatron-Core, NeMo or Megatron-Bridge, whose execution
  // `validate` simulates; else the framework that ran it, whose own schedule and memory
  // management Megatron's plan does not reproduce: its time is compared, its fit is not judged.
  std::string framework;
  std::string model_name;  // the preset's name, or "inline <model_type> config"
  Json model_json;         // the table's `model` value: the name or the inline config
  ModelSpec model;
  DeviceSpec device;  // the preset, efficiencies replaced by the calibration
  TrainingSetup setup;  // setup.recompute holds the one global option
  GlobalRecompute recompute = GlobalRecompute::kNone;
  // recompute full with Megatron's block method: the first that many decoder layers of each stage
  // (0: every layer, method uniform).
  int recompute_layers = 0;
  // Megatron's --cpu-offloading-num-layers: the first that many decoder layers keep their
  // activations in host memory (setup.recompute then also holds that option).
  int offload_layers = 0;
  std::vector<Measurement> measured;
};

// Which runs calibrate a device, and which efficiencies they fit.
// An efficiency by its name in a table ("gemm", "attention", "memory", "link").
double EfficiencyOf(const Efficiencies& e, const std::string& name);

struct Calibration {
  std::string device;
  std::vector<std::string> fit;  // "gemm", "attention", "memory", "link"
  std::string start_from;        // a device calibrated earlier whose fitted efficiencies this one starts from
  std::vector<std::string> runs;
};

struct RunTable {
  std::string source;  // file name, or "(built in)"
  std::vector<Calibration> calibration;
  std::vector<PublishedRun> runs;
};

// The bundled table (data/published-runs.yaml).
const std::string& BundledRunTableText();
// A run's `model` is a preset name, an inline Hugging Face config, or the path of a config.json
// (or checkpoint directory); its `device` a preset name or the path of a device file. Paths are
// read relative to `files_dir` when one is given (LoadRunTable gives the table's own directory),
// and refused without one (a table that is not a file: the bundled one, a fuzzer's input).
Result<RunTable> ReadRunTable(const Json& doc, const std::string& source,
                              const std::optional<std::string>& files_dir = std::nullopt);
Result<RunTable> LoadRunTable(const std::string& path);  // empty path: the bundled table

struct RunOutcome {
  const PublishedRun* run = nullptr;
  bool calibration = false;
  std::string flags;  // Megatron's split and recomputation
  bool fits = true;   // the plan fits in memory, with the default reserve
  Bytes peak_bytes = 0;  // the fullest rank's peak, the reserve included
  std::vector<double> predicted;  // parallel to run->measured
};

struct FittedDevice {
  std::string device;
  Efficiencies before, after;
  std::vector<std::string> fit, runs;
  int measurements = 0;
};

struct ErrorSummary {
  int count = 0;
  double mean_abs = 0;  // mean of |predicted / measured - 1|
  double mean = 0;      // mean of predicted / measured - 1: the model's bias
  double max_abs = 0;
  std::string worst;  // id of the run with the largest error
};

// The setups a run exercises beyond a dense model in bf16 with fp32 state: "moe" (routed
// experts), "cp" (context parallelism), "fp8" (FP8 GEMMs), "sharded" (ZeRO-2 or 3, bf16 gradients
// or moments, or optimizer offload). A run may be of several kinds, or of none ("dense").
std::vector<std::string> RunKinds(const PublishedRun& run);
const std::vector<std::string>& AllRunKinds();  // "dense", "moe", "cp", "fp8", "sharded"
// The kinds of a model trained with a setup (`offload_layers`: decoder layers whose activations
// go to the host), as RunKinds counts a run.
std::vector<std::string> SetupKinds(const ModelSpec& model, const TrainingSetup& setup, int offload_layers = 0);

// The bundled table's held-out mean |error| per kind (docs/fidelity.md): what a prediction of a
// kind has missed by on published runs it was not fitted on. Compiled in, so that every
// prediction can state it without refitting; tests/validate keeps it equal to Validate's.
struct HeldOutError {
  std::string kind;
  int time_count = 0, memory_count = 0;  // held-out measurements
  double time_mean_abs = 0, memory_mean_abs = 0;
};
const std::vector<HeldOutError>& BundledHeldOutErrors();
// The same table's held-out time error by device (`kind` is the device preset's name).
const std::vector<HeldOutError>& BundledHeldOutErrorsByDevice();

// What a prediction for the model and setup may be off by: the largest held-out error of the
// kinds it exercises, for time and for memory, with the kind and count it comes from.
// With `device` (a preset's name), the device's held-out time error too when it is larger, or that
// no published run on it is held out.
// The largest held-out mean |memory error| of the setup's kinds (0: none measured).
double MemoryUncertainty(const ModelSpec& model, const TrainingSetup& setup);
std::string PredictionUncertainty(const ModelSpec& model, const TrainingSetup& setup, const std::string& device = "");

struct KindSummary {
  std::string kind;
  int runs = 0;  // held-out runs of the kind
  ErrorSummary time, memory;
};

struct Validation {
  std::vector<FittedDevice> fitted;
  std::vector<RunOutcome> outcomes;  // in table order; they point into the table, which must outlive them
  ErrorSummary held_out_time, held_out_memory, calibration;
  std::vector<KindSummary> held_out_by_kind;  // in AllRunKinds() order, kinds without runs left out
  // The same by the model's family (its model_type) and by device, each group once, by name.
  std::vector<KindSummary> held_out_by_family, held_out_by_device;
  // Runs (they all ran) that the model predicts do not fit; of those timed by single layers, none
  // (the whole model need not have run), and of other frameworks' runs, none: those are in
  // `other_frameworks_not_fitting`, since Megatron's execution of their layout is not theirs.
  std::vector<std::string> not_fitting;
  std::vector<std::size_t> other_frameworks_not_fitting;  // indices into `outcomes`
};

// Fits each calibration group, then predicts every run. Deterministic.
// How a fit runs: its grid of evaluations stops at `deadline` (and its stop flag: Ctrl-C), with
// an error (ErrorKind::kStopped) naming `name` ("--time-limit 300 s") or what set the flag
// (`stopped_by`, asked once it has: "Ctrl-C", "SIGTERM"), and reports the evaluations done of all
// to `progress`.
struct FitOptions {
  Deadline deadline = Deadline::Never();
  std::string name = "the time limit";
  std::function<std::string()> stopped_by = [] { return std::string("Ctrl-C"); };
  ProgressSink progress;
};

Result<Validation> Validate(const RunTable& table, const FitOptions& limit = {});

// `bmpipe calibrate`: a device preset's efficiencies fitted to a user's own measured runs.
struct DeviceCalibration {
  DeviceSpec device;        // the runs' device (a preset or a device file) with the fitted efficiencies
  Efficiencies before;      // the device's own
  std::vector<std::string> fit;
  std::vector<RunOutcome> before_outcomes, after_outcomes;  // every run of the table, in order
};

// Fits `fit` (one or two efficiency names, a joint grid search as Validate's) of the device (preset
// or device file) that every run of `table` is on, starting from its efficiencies, to the runs'
// measurements (the table's calibration entries are not used). Fails when the runs are on
// several devices or a name is unknown.
Result<DeviceCalibration> CalibrateDevice(const RunTable& table, const std::vector<std::string>& fit,
                                          const FitOptions& limit = {});

// predicted / measured - 1.
inline double RelativeError(double predicted, double measured) { return predicted / measured - 1; }

}  // namespace bmpipe

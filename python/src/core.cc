// bmpipe._core: the C++ library under the Python package (python/bmpipe). Documents cross as
// JSON text (the plan file, compare --json, validate --json: the command line's own writers), the
// problem as an opaque handle. The library's errors become the package's exceptions with the same
// messages. Long work (plan, compare, search) releases the GIL, reports progress to a Python
// callable, and on Ctrl-C (from the main thread) stops and returns its best, as the command does.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "bmpipe/baselines/baselines.h"
#include "bmpipe/baselines/compare.h"
#include "bmpipe/core/document.h"
#include "bmpipe/cost/problem_builder.h"
#include "bmpipe/cost/setup_reader.h"
#include "bmpipe/app/builtin_example.h"
#include "bmpipe/report/chrome_trace.h"
#include "bmpipe/report/compare_report.h"
#include "bmpipe/frameworks/formats.h"
#include "bmpipe/frameworks/formats.h"
#include "bmpipe/io/plan_json.h"
#include "bmpipe/io/problem_json.h"
#include "bmpipe/report/progress_printer.h"
#include "bmpipe/report/search_report.h"
#include "bmpipe/frameworks/torch/profiler_trace.h"
#include "bmpipe/report/validate_report.h"
#include "bmpipe/model/model.h"
#include "bmpipe/problem/problem_reader.h"
#include "bmpipe/problem/recompute.h"
#include "bmpipe/schedule/schedule.h"
#include "bmpipe/search/search_reader.h"
#include "bmpipe/sim/simulator.h"
#include "bmpipe/solve/diagnose.h"
#include "bmpipe/solve/planner.h"
#include "bmpipe/frameworks/settings.h"
#include "bmpipe/validate/validate.h"

namespace nb = nanobind;

namespace bmpipe {
namespace {

// One C++ type per Python exception (python/bmpipe/errors.py names them), told apart by a tag.
template <int Tag>
struct Raised : std::runtime_error {
  using std::runtime_error::runtime_error;
};
using InvalidInputException = Raised<0>;
using FileException = Raised<1>;
using TooLargeException = Raised<2>;
using InternalException = Raised<3>;
using NoFitException = Raised<4>;
using NoPlanException = Raised<5>;

[[noreturn]] void Raise(const Error& e) {
  switch (e.kind) {
    case ErrorKind::kInvalidInput:
      throw InvalidInputException(e.message);
    case ErrorKind::kIo:
      throw FileException(e.message);
    case ErrorKind::kTooLarge:
      throw TooLargeException(e.message);
    case ErrorKind::kInternal:
      break;
  }
  throw InternalException(e.message + " (a bug in bmpipe; please report it with the input and this message)");
}

template <typename T>
T Take(Result<T> r) {
  if (!r.ok()) Raise(r.error());
  return std::move(r).value();
}

void Check(const Status& s) {
  if (!s.ok()) Raise(s.error());
}

using Notes = std::vector<std::string>;

std::pair<Problem, Notes> ProblemFromText(const std::string& text, const std::string& source) {
  Json doc = Take(ParseDocument(text, source));
  Notes notes;
  Problem problem = Take(ReadProblem(doc, source, &notes));
  return {std::move(problem), std::move(notes)};
}

std::pair<Problem, Notes> ProblemFromFile(const std::string& path) {
  Notes notes;
  Problem problem = Take(LoadProblem(path, &notes));
  return {std::move(problem), std::move(notes)};
}

Problem BuiltinExample() { return ProblemFromText(BuiltinExampleText(), BuiltinExampleName()).first; }

// The cost model's problem for a model (preset or Hugging Face config.json), a device (preset or
// file) and a setup (setup_reader.h's keys, as JSON text). Without "recompute" the setup offers
// the default options and those the targets' settings use, as the command line does.
Problem ProblemFromModel(const std::string& model_name, const std::string& device_name, const std::string& setup_json,
                         const std::vector<std::string>& targets) {
  const ModelSpec model = Take(LoadModel(model_name));
  const DeviceSpec device = Take(LoadDevice(device_name));
  std::vector<TargetKind> kinds;
  for (const std::string& t : targets) kinds.push_back(Take(ParseTarget(t)));
  std::vector<std::string> more_options;
  AddTargetRecomputeOptions(kinds, more_options);
  const TrainingSetup setup = Take(ReadTrainingSetup(Take(ParseDocument(setup_json, "setup")), "setup", more_options));
  return Take(BuildProblem(model, device, setup));
}

PlanDocument ReadPlanDocument(const Problem& problem, const std::string& text, const std::string& source) {
  const Json doc = Take(ParseDocument(text, source));
  return Take(ReadPlan(doc, problem, source));
}

Plan ReadPlanText(const Problem& problem, const std::string& text, const std::string& source) {
  return ReadPlanDocument(problem, text, source).plan;
}

// The plan file's text of a plan simulated again, as `simulate` writes it: the solver's report
// the plan came with (none: "none"), infeasible when a rank exceeds memory.
std::string SimulatedText(const Problem& problem, const Plan& plan, const std::optional<SolverInfo>& came_with) {
  const SimResult sim = Take(SimulatePlan(problem, plan));
  SolverInfo solver = came_with.value_or(SolverInfo{"none", SolveStatus::kFeasible, 0.0});
  if (!sim.fits) solver.status = SolveStatus::kInfeasible;
  return PlanJsonText(problem, plan, sim, solver);
}

// A plan from a launcher's configuration or a plan file's text, in `format` or detected; returns
// the plan file's text (with the simulator's metrics) and the reader's notes.
std::pair<std::string, Notes> ReadAnyPlanText(const Problem& problem, const std::string& text, const std::string& format,
                                              const std::string& source) {
  const PlanFormat f = format.empty() ? Take(DetectPlanFormat(text)) : Take(ParsePlanFormat(format));
  Notes notes;
  if (f == kPlanFile) {
    const PlanDocument doc = ReadPlanDocument(problem, text, source);
    return {SimulatedText(problem, doc.plan, doc.solver), std::move(notes)};
  }
  const Plan plan = Take(ReadLauncherPlan(text, f, problem, source, &notes));
  return {SimulatedText(problem, plan, std::nullopt), std::move(notes)};
}

// Ctrl-C while long work runs: with the GIL released Python's own handler cannot run, so a C
// handler sets the work's stop flag (the work returns its best, as the command line does) and
// Python's handler comes back afterwards. Only on the main thread, where Python handles signals.
std::atomic<bool> g_interrupted{false};
extern "C" void OnInterrupt(int) { g_interrupted.store(true); }

class InterruptScope {
 public:
  explicit InterruptScope(bool active) : active_(active) {
    g_interrupted.store(false);
    if (active_) previous_ = std::signal(SIGINT, OnInterrupt);
  }
  ~InterruptScope() {
    if (active_) std::signal(SIGINT, previous_);
  }
  InterruptScope(const InterruptScope&) = delete;
  InterruptScope& operator=(const InterruptScope&) = delete;
  Deadline deadline() const { return Deadline::Never().StoppedBy(&g_interrupted); }
  bool interrupted() const { return g_interrupted.load(); }

 private:
  bool active_;
  void (*previous_)(int) = SIG_DFL;
};

// The work's progress to a Python callable, one JSON object a report (the fields of the command
// line's --progress lines). An exception in the callable stops the work and is raised after it.
class ProgressBridge {
 public:
  ProgressBridge(nb::object callback, std::string command, const InterruptScope& scope)
      : callback_(std::move(callback)), command_(std::move(command)), began_(Deadline::Clock::now()) {
    stop_ = scope.deadline();
  }
  ProgressSink Sink() {
    if (callback_.is_none()) return nullptr;
    return [this](const Progress& p) {
      const double elapsed = std::chrono::duration<double>(Deadline::Clock::now() - began_).count();
      const std::string line = ProgressJson(command_, p, elapsed);
      nb::gil_scoped_acquire gil;
      std::lock_guard<std::mutex> guard(lock_);
      if (error_) return;
      try {
        callback_(line);
      } catch (nb::python_error& e) {
        error_.emplace(std::move(e));
        g_interrupted.store(true);
      }
    };
  }
  // With the GIL held, after the work: the callable's exception, if it raised one.
  void RaiseIfFailed() {
    if (error_) {
      nb::python_error e = std::move(*error_);
      error_.reset();
      throw e;
    }
  }
  const Deadline& stop() const { return stop_; }

 private:
  nb::object callback_;
  std::string command_;
  Deadline::Clock::time_point began_;
  Deadline stop_;
  std::mutex lock_;
  std::optional<nb::python_error> error_;
};

// Long work: `work(stop, progress)` runs with the GIL released, Ctrl-C (from the main thread) and
// an exception of the progress callable stopping it; its Result's error is raised, or the
// callable's exception. `interrupted` says whether Ctrl-C stopped it.
template <typename Work>
auto RunReleased(const std::string& command, nb::object progress, bool catch_interrupt, bool* interrupted, Work work) {
  InterruptScope scope(catch_interrupt);
  ProgressBridge bridge(std::move(progress), command, scope);
  std::optional<decltype(work(Deadline{}, ProgressSink{}))> result;
  {
    nb::gil_scoped_release release;
    result.emplace(work(bridge.stop(), bridge.Sink()));
  }
  bridge.RaiseIfFailed();
  if (interrupted != nullptr) *interrupted = scope.interrupted();
  return Take(std::move(*result));
}

// Plans for `target` within `time_limit_s`; returns the plan file's text with metrics and the
// solver's report. No plan that fits: NoFitError, with the diagnosis the command line prints.
std::string PlanProblem(const Problem& problem, const std::string& target, const std::string& solver,
                        double time_limit_s, long node_limit, nb::object progress, bool catch_interrupt) {
  const TargetKind kind = Take(ParseTarget(target));
  if (problem.training) Check(TargetRunsSetup(kind, *problem.training, &problem.pipeline));
  PlannerOptions options;
  if (solver == "bnb") {
    options.kind = PlannerKind::kBranchAndBound;
  } else if (solver == "cbc") {
    options.kind = PlannerKind::kCbc;
  } else if (solver == "brute-force") {
    options.kind = PlannerKind::kBruteForce;
  } else {
    Raise(InvalidInput("solver '" + solver + "': use bnb, cbc or brute-force"));
  }
  if (!(time_limit_s > 0)) Raise(InvalidInput(fmt::format("time_limit {:g}: give a positive number of seconds", time_limit_s)));
  options.time_limit_s = time_limit_s;
  options.time_limit_name = fmt::format("time limit {:g} s", time_limit_s);
  options.node_limit = node_limit;
  bool interrupted = false;
  PlannerResult r = RunReleased("plan", std::move(progress), catch_interrupt, &interrupted,
                                [&](const Deadline& stop, ProgressSink sink) {
                                  options.deadline = stop;
                                  options.progress = std::move(sink);
                                  return PlanForTarget(problem, kind, options);
                                })
                        .planner;
  if (interrupted && !r.stopped_by.empty()) r.stopped_by = "Ctrl-C";
  if (r.status == PlanStatus::kInfeasible) {
    throw NoFitException("no plan fits in memory: " + DescribeShortfall(problem, DiagnoseMemory(problem)));
  }
  if (r.status == PlanStatus::kNoPlan) {
    throw NoPlanException("no plan found: the search was stopped by " + r.stopped_by +
                          " before it found a plan that fits; raise time_limit");
  }
  const SimResult sim = Take(SimulatePlan(problem, r.plan));
  return PlanJsonText(problem, r.plan, sim, SolverInfoOf(r));
}

// The plan file's text of `plan_text` (a plan file) or, without one, of a strategy's plan: "even"
// (an even split, every layer's first option) or "megatron" (Megatron-LM's default layout, with
// `recompute` none, selective or full; needs a problem built by the cost model).
std::string SimulateProblem(const Problem& problem, const std::optional<std::string>& plan_text,
                            const std::string& strategy, const std::string& recompute) {
  Plan plan;
  if (plan_text) {
    const PlanDocument doc = ReadPlanDocument(problem, *plan_text, "plan");
    return SimulatedText(problem, doc.plan, doc.solver);
  } else if (strategy == "megatron") {
    const std::optional<GlobalRecompute> global = ParseGlobalRecompute(recompute);
    if (!global) Raise(InvalidInput("recompute '" + recompute + "': Megatron's global setting is none, selective or full"));
    plan = Take(MegatronDefaultPlan(problem, *global)).plan;
  } else if (strategy == "even") {
    plan = EvenPlan(problem);
  } else {
    Raise(InvalidInput("strategy '" + strategy + "': use even or megatron"));
  }
  return SimulatedText(problem, plan, std::nullopt);
}

// Every rank's ops in order: (stage, micro-batch, kind F/B/W, start s, end s), as simulated.
std::vector<std::vector<std::tuple<int, int, std::string, double, double>>> Timeline(const Problem& problem,
                                                                                     const std::string& plan_text) {
  const Plan plan = ReadPlanText(problem, plan_text, "plan");
  const SimResult sim = Take(SimulatePlan(problem, plan));
  const Schedule schedule(problem.pipeline);
  std::vector<std::vector<std::tuple<int, int, std::string, double, double>>> out(schedule.rank_ops().size());
  for (std::size_t r = 0; r < out.size(); ++r) {
    const std::vector<Op>& ops = schedule.rank_ops()[r];
    for (std::size_t i = 0; i < ops.size(); ++i) {
      const OpTiming& t = sim.op_timing[r][i];
      const char* kind = ops[i].kind == OpKind::kForward ? "F" : ops[i].kind == OpKind::kBackward ? "B" : "W";
      out[r].emplace_back(ops[i].stage, ops[i].micro_batch, kind, t.start_ns / 1e9, t.end_ns / 1e9);
    }
  }
  return out;
}

std::string ChromeTrace(const Problem& problem, const std::string& plan_text, const std::string& title) {
  return Take(PlanChromeTrace(problem, ReadPlanText(problem, plan_text, "plan"), title));
}

std::string ExportPlanText(const Problem& problem, const std::string& plan_text, const std::string& to,
                           const std::string& target) {
  const Plan plan = ReadPlanText(problem, plan_text, "plan");
  const FrameworkId format = Take(ParseFormat(to));
  const TargetKind kind = target.empty() ? DefaultTarget(format) : Take(ParseTarget(target));
  return Take(ExportPlan(problem, plan, format, kind));
}

std::string CompareProblem(const Problem& problem, const std::string& target, double time_limit_s,
                           const std::vector<std::string>& baselines, nb::object progress, bool catch_interrupt) {
  CompareOptions options;
  options.target = Take(ParseTarget(target));
  if (problem.training) Check(TargetRunsSetup(options.target, *problem.training, &problem.pipeline));
  if (!(time_limit_s > 0)) Raise(InvalidInput(fmt::format("time_limit {:g}: give a positive number of seconds", time_limit_s)));
  options.time_limit_s = time_limit_s;
  if (!baselines.empty()) {
    options.baselines.clear();
    std::vector<std::string> names;
    for (BaselineKind kind : AllBaselines()) names.push_back(BaselineName(kind));
    for (const std::string& name : baselines) {
      const auto at = std::find(names.begin(), names.end(), name);
      if (at == names.end()) {
        Raise(InvalidInput(fmt::format("baselines: unknown planner '{}'{}; planners: {}", name, DidYouMean(name, names),
                                       fmt::join(names, ", "))));
      }
      options.baselines.push_back(AllBaselines()[static_cast<std::size_t>(at - names.begin())]);
    }
  }
  const std::vector<CompareRow> rows =
      RunReleased("compare", std::move(progress), catch_interrupt, nullptr, [&](const Deadline& stop, ProgressSink sink) {
        options.deadline = stop;
        options.progress = std::move(sink);
        return Compare(problem, options);
      });
  return CompareToJson(problem, rows).dump(2) + "\n";
}

// The whole-cluster search for a model and a device; options as search_reader.h reads them (JSON
// text). Returns `search --json`'s document.
std::string SearchCluster(const std::string& model_name, const std::string& device_name, const std::string& options_json,
                          nb::object progress, bool catch_interrupt) {
  const ModelSpec model = Take(LoadModel(model_name));
  const DeviceSpec device = Take(LoadDevice(device_name));
  SearchOptions options = Take(ReadSearchOptions(Take(ParseDocument(options_json, "search options")), "search options"));
  const SearchResult result =
      RunReleased("search", std::move(progress), catch_interrupt, nullptr, [&](const Deadline& stop, ProgressSink sink) {
        options.deadline = stop;
        options.progress = std::move(sink);
        return SearchConfigurations(model, device, options);
      });
  return SearchDocument(model, device, options, result).dump(2) + "\n";
}

// `bmpipe profile`: the problem of PyTorch profiler traces, one per (option, path).
Problem ProblemFromTraceFiles(const std::vector<std::pair<std::string, std::string>>& files, int ranks, int chunks,
                              int micro_batches, const std::string& schedule, double memory_bytes,
                              double reserved_bytes, double p2p_s, double optimizer_bytes_per_parameter) {
  const Problem base = Take(TraceBaseProblem(ranks, chunks, micro_batches, schedule, memory_bytes, reserved_bytes, p2p_s));
  std::vector<TraceOption> traces;
  for (const auto& [option, path] : files) {
    Check(ParseRecompute(option).ok() ? Status{} : Status(ParseRecompute(option).error()));
    traces.push_back({option, path, Take(LoadDocument(path))});
  }
  return Take(ProblemFromTraces(traces, base, optimizer_bytes_per_parameter));
}

// `calibrate --json`'s document and the device file.
std::pair<std::string, std::string> CalibrateRuns(const std::string& path, const std::vector<std::string>& fit) {
  const RunTable table = Take(LoadRunTable(path));
  const DeviceCalibration c = Take(CalibrateDevice(table, fit));
  return {CalibrationToJson(table, c).dump(2) + "\n", CalibratedDeviceYaml(table, c)};
}

std::string ValidateRuns(const std::string& path) {
  const RunTable table = Take(LoadRunTable(path));
  const Validation v = Take(Validate(table));
  return ValidationToJson(table, v).dump(2) + "\n";
}

}  // namespace
}  // namespace bmpipe

NB_MODULE(_core, m) {
  using namespace bmpipe;
  m.doc() = "bmpipe's C++ core; use the package bmpipe, not this module.";

  nb::object base = nb::module_::import_("bmpipe._errorbase").attr("Error");
  // Shown as bmpipe.errors.X (where the package exports them).
  const auto named = [](nb::handle type) { type.attr("__module__") = "bmpipe.errors"; };
  named(nb::exception<InvalidInputException>(m, "InvalidInputError", base));
  named(nb::exception<FileException>(m, "FileError", base));
  named(nb::exception<TooLargeException>(m, "TooLargeError", base));
  named(nb::exception<InternalException>(m, "InternalError", base));
  named(nb::exception<NoFitException>(m, "NoFitError", base));
  named(nb::exception<NoPlanException>(m, "NoPlanError", base));

  nb::class_<Problem>(m, "Problem")
      .def_ro("name", &Problem::name)
      .def_prop_ro("num_layers", &Problem::num_layers)
      .def_prop_ro("ranks", [](const Problem& p) { return p.pipeline.ranks; })
      .def_prop_ro("chunks", [](const Problem& p) { return p.pipeline.chunks; })
      .def_prop_ro("stages", [](const Problem& p) { return p.pipeline.stages(); })
      .def_prop_ro("micro_batches", [](const Problem& p) { return p.pipeline.micro_batches; })
      .def_prop_ro("schedule", [](const Problem& p) { return std::string(ScheduleName(p.pipeline.schedule)); })
      .def_prop_ro("memory_bytes", [](const Problem& p) { return p.memory_bytes; });

  m.def("problem_from_text", &ProblemFromText, nb::arg("text"), nb::arg("source"));
  m.def("problem_from_file", &ProblemFromFile, nb::arg("path"));
  m.def("builtin_example", &BuiltinExample);
  m.def("problem_from_model", &ProblemFromModel, nb::arg("model"), nb::arg("device"), nb::arg("setup_json"),
        nb::arg("targets"));
  m.def("problem_json", &ProblemJsonText, nb::arg("problem"), nb::arg("description"));
  m.def("plan", &PlanProblem, nb::arg("problem"), nb::arg("target"), nb::arg("solver"), nb::arg("time_limit"),
        nb::arg("node_limit"), nb::arg("progress").none(), nb::arg("catch_interrupt"));
  m.def("simulate", &SimulateProblem, nb::arg("problem"), nb::arg("plan").none(), nb::arg("strategy"),
        nb::arg("recompute"));
  m.def("read_plan", &ReadAnyPlanText, nb::arg("problem"), nb::arg("text"), nb::arg("format"), nb::arg("source"));
  m.def("timeline", &Timeline, nb::arg("problem"), nb::arg("plan"));
  m.def("chrome_trace", &ChromeTrace, nb::arg("problem"), nb::arg("plan"), nb::arg("title"));
  m.def("export", &ExportPlanText, nb::arg("problem"), nb::arg("plan"), nb::arg("to"), nb::arg("target"));
  m.def("compare", &CompareProblem, nb::arg("problem"), nb::arg("target"), nb::arg("time_limit"),
        nb::arg("baselines"), nb::arg("progress").none(), nb::arg("catch_interrupt"));
  m.def("search", &SearchCluster, nb::arg("model"), nb::arg("device"), nb::arg("options_json"),
        nb::arg("progress").none(), nb::arg("catch_interrupt"));
  m.def("problem_from_traces", &ProblemFromTraceFiles, nb::arg("traces"), nb::arg("ranks"), nb::arg("chunks"),
        nb::arg("micro_batches"), nb::arg("schedule"), nb::arg("memory_bytes"), nb::arg("reserved_bytes"),
        nb::arg("p2p_s"), nb::arg("optimizer_bytes_per_parameter"));
  m.def("calibrate", &CalibrateRuns, nb::arg("path"), nb::arg("fit"));
  m.def("validate", &ValidateRuns, nb::arg("path"));
  m.def("model_presets", &ModelPresetNames);
  m.def("device_presets", &DevicePresetNames);
}

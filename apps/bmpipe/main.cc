// The bmpipe command line: parsing and printing only; the work happens in the libraries.
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "bmpipe/baselines/baselines.h"
#include "bmpipe/core/json_cursor.h"
#include "bmpipe/core/text.h"
#include "bmpipe/cost/layer_ops.h"
#include "bmpipe/cost/problem_builder.h"
#include "bmpipe/cost/setup_reader.h"
#include "bmpipe/app/builtin_example.h"
#include "bmpipe/report/chrome_trace.h"
#include "bmpipe/report/compare_report.h"
#include "bmpipe/frameworks/formats.h"
#include "bmpipe/frameworks/formats.h"
#include "bmpipe/io/output_file.h"
#include "bmpipe/io/plan_json.h"
#include "bmpipe/io/problem_json.h"
#include "bmpipe/report/progress_printer.h"
#include "bmpipe/report/report.h"
#include "bmpipe/report/search_report.h"
#include "bmpipe/report/svg.h"
#include "bmpipe/frameworks/torch/profiler_trace.h"
#include "bmpipe/report/validate_report.h"
#include "bmpipe/problem/problem_reader.h"
#include "bmpipe/problem/sapp_reader.h"
#include "bmpipe/sim/simulator.h"
#include "bmpipe/solve/diagnose.h"
#include "bmpipe/solve/planner.h"
#include "bmpipe/frameworks/settings.h"

namespace bmpipe {
namespace {

// Exit codes, in one place.
constexpr int kExitOk = 0;
constexpr int kExitInternal = 1;
constexpr int kExitBadInput = 2;  // bad command line or invalid input file
constexpr int kExitIo = 3;        // a file could not be read or written
constexpr int kExitNoFit = 4;     // proven: no plan fits in memory
constexpr int kExitNoPlan = 5;    // the time limit stopped the search before any plan
constexpr int kExitTooLarge = 6;  // the work does not fit in the memory available

constexpr const char* kInterruptName = "Ctrl-C";

// Ctrl-C: the first stops the work, which returns what it has (the best plan so far, with its
// gap); a second ends the process as usual.
std::atomic<bool> g_interrupted{false};

extern "C" void OnInterrupt(int) {
  g_interrupted.store(true);
  std::signal(SIGINT, SIG_DFL);
}

// Called by plan, compare and search before their work starts.
void StopOnInterrupt() { std::signal(SIGINT, OnInterrupt); }

// The stop flag as a deadline, for the work's options.
Deadline InterruptDeadline() { return Deadline::Never().StoppedBy(&g_interrupted); }

// Where a limit named `limit_name` is said to have stopped the work, the interrupt did if there was one.
std::string StoppedBy(const std::string& stopped_by, const std::string& limit_name) {
  if (!g_interrupted.load() || stopped_by.empty()) return stopped_by;
  std::string out = stopped_by;
  for (std::size_t at = out.find(limit_name); !limit_name.empty() && at != std::string::npos;
       at = out.find(limit_name, at + 1)) {
    out.replace(at, limit_name.size(), kInterruptName);
  }
  return out;
}

int Fail(const Error& error) {
  std::cerr << "bmpipe: error: " << error.message << "\n";
  switch (error.kind) {
    case ErrorKind::kInvalidInput:
      return kExitBadInput;
    case ErrorKind::kIo:
      return kExitIo;
    case ErrorKind::kTooLarge:
      return kExitTooLarge;
    case ErrorKind::kInternal:
      std::cerr << "bmpipe: this is a bug in bmpipe; please report it with the command line, the input files and this message\n";
      return kExitInternal;
  }
  return kExitInternal;
}

// The end of a command that succeeded: writes the files it staged and the JSON to --out, all or
// none, then prints the JSON or the report. A command that fails returns before this, so it
// leaves no file behind.
int Emit(OutputFiles& files, const std::string& out, bool json, const std::string& json_text,
         const std::string& report) {
  if (!out.empty()) files.Add(out, json_text);
  Status written = files.Commit();
  if (!written.ok()) return Fail(written.error());
  std::cout << (json ? json_text : report);
  return kExitOk;
}

// --svg and what of the timeline it draws (--svg-window, --svg-ranks).
struct SvgOptions {
  std::string path;
  std::string window;
  std::string ranks;
};

void AddSvgOptions(CLI::App& cmd, SvgOptions& svg, const std::string& help) {
  cmd.add_option("--svg", svg.path, help);
  cmd.add_option("--svg-window", svg.window,
                 "With --svg: draw only this time window, START:END in seconds from the iteration's start (either may "
                 "be left out), for production-size runs");
  cmd.add_option("--svg-ranks", svg.ranks, "With --svg: draw only these ranks, e.g. 0-3,8");
}

// Checks --svg's view of `problem` before the work (none without --svg).
Status CheckSvg(const SvgOptions& svg, const Problem& problem, int panels) {
  if (svg.path.empty()) {
    if (!svg.window.empty() || !svg.ranks.empty()) return InvalidInput("--svg-window and --svg-ranks need --svg FILE");
    return {};
  }
  Result<TimelineView> view = ParseTimelineView(svg.window, svg.ranks, problem);
  if (!view.ok()) return view.error();
  return CheckTimelineSize(problem, panels, view.value());
}

// Stages the timeline of `panels` (each simulated again with its memory trace) for --svg.
Status StageSvg(OutputFiles& files, const SvgOptions& svg, const Problem& problem, const std::string& title,
                const std::vector<std::pair<std::string, Plan>>& plans) {
  if (Status size = CheckSvg(svg, problem, static_cast<int>(plans.size())); !size.ok()) return size;
  const TimelineView view = ParseTimelineView(svg.window, svg.ranks, problem).value();
  std::vector<TimelinePanel> panels;
  SimOptions options;
  options.record_memory = true;
  for (const auto& [label, plan] : plans) {
    Result<SimResult> sim = SimulatePlan(problem, plan, options);
    if (!sim.ok()) return sim.error();
    panels.push_back({label, plan, sim.value()});
  }
  Result<std::string> text = TimelineSvg(problem, title, panels, view);
  if (!text.ok()) return text.error();
  files.Add(svg.path, text.value());
  return {};
}

// The cost-model form of a problem: a model, a device and a training setup.
// The setup's switches given as words or in GB on the command line (plan, simulate, compare and
// search share them).
struct SetupWords {
  std::string precision = "bf16";
  std::string grad_dtype = "fp32";
  std::string optimizer_dtype = "fp32";
  std::string moe_dispatcher = "alltoall";
  std::vector<std::string> offload;
  double headroom_gb = 0;
};

struct ModelArgs {
  std::string model;
  std::string device;
  TrainingSetup setup;
  SetupWords words;
  bool recompute_given = false;  // --recompute was on the command line
  std::string schedule = "1f1b";
  double reserved_gb = -1;  // < 0: the default
  std::string dump_problem;
};

Result<Problem> BuildModelProblem(const ModelArgs& args, std::vector<std::pair<std::string, std::string>>& lines,
                                  OutputFiles& files, const std::vector<TargetKind>& targets);

// The words into the setup: --precision, --grad-dtype, --optimizer-dtype, --offload,
// --memory-headroom-gb.
Status ApplySetupWords(const SetupWords& w, TrainingSetup& setup) {
  // CLI checks each word against the same names (IsMember), so every word parses.
  setup.precision = ParsePrecision(w.precision).value_or(Precision::kBf16);
  setup.grad_dtype = ParseStateDtype(w.grad_dtype).value_or(StateDtype::kFp32);
  setup.optimizer_dtype = ParseStateDtype(w.optimizer_dtype).value_or(StateDtype::kFp32);
  setup.moe_dispatcher = ParseMoeDispatcher(w.moe_dispatcher).value_or(MoeDispatcher::kAllToAll);
  if (Status offload = ApplyOffload(w.offload, setup); !offload.ok()) return offload;
  const std::optional<Bytes> headroom = CheckedBytes(w.headroom_gb * 1e9);
  if (!headroom || w.headroom_gb < 0) {
    return InvalidInput(fmt::format("--memory-headroom-gb {:g} must be between 0 and {:g} GB", w.headroom_gb,
                                    kMaxInputBytes / 1e9));
  }
  setup.headroom_bytes = *headroom;
  return {};
}

// --reserved-gb in bytes; `gb` < 0 (the flag not given) leaves the default.
Status SetReservedBytes(double gb, TrainingSetup& setup) {
  if (gb < 0) return {};
  const std::optional<Bytes> bytes = CheckedBytes(gb * 1e9);
  if (!bytes) {
    return InvalidInput(fmt::format("--reserved-gb {:g} is more than any device holds (at most {:g} GB); give the "
                                    "memory reserved for the framework in GB",
                                    gb, kMaxInputBytes / 1e9));
  }
  setup.reserved_bytes = *bytes;
  return {};
}

// A problem file, its deprecation notes (old key names) printed to stderr.
Result<Problem> LoadProblemFile(const std::string& path) {
  std::vector<std::string> notes;
  Result<Problem> problem = LoadProblem(path, &notes);
  for (const std::string& n : notes) std::cerr << "bmpipe: note: " << n << "\n";
  return problem;
}

struct SimulateArgs {
  std::string problem;
  ModelArgs model;
  std::string plan;
  std::string plan_format;  // empty: detected from the content
  std::string strategy;  // even or megatron; default: megatron with --model, else even
  bool json = false;
  std::string out;
  SvgOptions svg;
  std::string trace;
};

// Stages the Chrome trace of `plan` for `path` and says so in the report's header.
Status StageTrace(OutputFiles& files, const std::string& path, const Problem& problem, const Plan& plan,
                  const std::string& title, ReportHeader& header) {
  Result<std::string> trace = PlanChromeTrace(problem, plan, title);
  if (!trace.ok()) return trace.error();
  files.Add(path, trace.value());
  header.lines.push_back({"trace", "written to " + path + " (Chrome trace: Perfetto, chrome://tracing)"});
  return {};
}

int RunSimulate(const SimulateArgs& args) {
  std::vector<std::pair<std::string, std::string>> origin;
  if (args.problem.empty() && args.model.model.empty()) {
    return Fail(InvalidInput("simulate needs --problem FILE, or --model with --device and a training setup"));
  }
  const std::string strategy = !args.strategy.empty() ? args.strategy : args.model.model.empty() ? "even" : "megatron";
  GlobalRecompute recompute = GlobalRecompute::kNone;
  if (!args.model.model.empty()) {
    const std::vector<std::string>& r = args.model.setup.recompute;
    const std::optional<GlobalRecompute> global = r.size() == 1 ? ParseGlobalRecompute(r.front()) : std::nullopt;
    if (!global) {
      return Fail(InvalidInput(fmt::format("--recompute {}: simulate applies one global setting as Megatron does; use "
                                           "none, selective or full",
                                           fmt::join(r, ","))));
    }
    recompute = *global;
  }
  OutputFiles files;
  Result<Problem> problem =
      args.model.model.empty() ? LoadProblemFile(args.problem) : BuildModelProblem(args.model, origin, files, {});
  if (!problem.ok()) return Fail(problem.error());
  const Problem& pb = problem.value();
  if (origin.empty()) origin.push_back({"problem", args.problem + (pb.name.empty() ? "" : " (" + pb.name + ")")});
  if (Status size = CheckSvg(args.svg, pb, 1); !size.ok()) return Fail(size.error());
  if (Status size = CheckTraceSize(pb); !args.trace.empty() && !size.ok()) return Fail(size.error());

  Plan plan;
  SolverInfo solver{"none", SolveStatus::kFeasible, 0.0};
  std::string plan_origin;
  if (!args.plan.empty() && !args.strategy.empty()) {
    return Fail(InvalidInput("give --plan or --strategy, not both"));
  }
  std::optional<PlanFormat> format;
  if (!args.plan_format.empty()) {
    if (args.plan.empty()) return Fail(InvalidInput("--plan-format " + args.plan_format + " needs --plan FILE"));
    Result<PlanFormat> parsed = ParsePlanFormat(args.plan_format);
    if (!parsed.ok()) return Fail(parsed.error());
    format = parsed.value();
  }
  std::vector<std::pair<std::string, std::string>> notes;
  if (args.plan.empty() && strategy == "megatron") {
    Result<MegatronLaunch> launch = MegatronDefaultPlan(pb, recompute);
    if (!launch.ok()) return Fail(launch.error());
    plan = launch.value().plan;
    plan_origin = "Megatron-LM: " + launch.value().flags;
  } else if (args.plan.empty()) {
    plan = EvenPlan(pb);
    plan_origin = "even split, first option of every layer (no --plan given)";
  } else {
    Result<LoadedPlan> loaded = LoadAnyPlan(args.plan, format, pb);
    if (!loaded.ok()) return Fail(loaded.error());
    const LoadedPlan& doc = loaded.value();
    plan = doc.document.plan;
    if (doc.document.solver) solver = *doc.document.solver;
    plan_origin = args.plan;
    if (doc.format != kPlanFile && doc.format != PlanFormat{FrameworkId::kMindFormers}) {
      plan_origin += " (" + PlanFormatName(doc.format) + " configuration)";
    }
    for (const std::string& note : doc.notes) notes.push_back({"note", note});
  }
  Result<SimResult> sim = SimulatePlan(pb, plan);
  if (!sim.ok()) return Fail(sim.error());
  if (!sim.value().fits) solver.status = SolveStatus::kInfeasible;

  ReportHeader header{"bmpipe simulate", origin};
  header.lines.push_back({"plan", plan_origin});
  header.lines.insert(header.lines.end(), notes.begin(), notes.end());
  if (!args.svg.path.empty()) {
    Status written = StageSvg(files, args.svg, pb, "bmpipe simulate: " + (pb.name.empty() ? args.problem : pb.name),
                              {{plan_origin, plan}});
    if (!written.ok()) return Fail(written.error());
    header.lines.push_back({"timeline", "written to " + args.svg.path});
  }
  if (!args.trace.empty()) {
    Status written = StageTrace(files, args.trace, pb, plan, "bmpipe simulate: " + (pb.name.empty() ? args.problem : pb.name), header);
    if (!written.ok()) return Fail(written.error());
  }
  const int code = Emit(files, args.out, args.json, PlanJsonText(pb, plan, sim.value(), solver),
                        FormatReport(header, pb, plan, sim.value()));
  if (code == kExitOk && !sim.value().fits) {
    std::cerr << "bmpipe: warning: the plan exceeds device memory on at least one rank (see the report)\n";
  }
  return code;
}

struct PlanArgs {
  std::string problem;
  std::string target;
  ModelArgs model;
  std::string sapp;  // the MindFormers pipeline-balance tool's init YAML or layer JSON
  SappTarget sapp_target;
  std::string export_format;
  std::string export_out;
  SvgOptions svg;
  std::string trace;
  std::string out;
  bool json = false;
  double time_limit_s = 60;
  std::string solver = "bnb";
  long node_limit = -1;
  std::string lp_file;
  std::string progress = "auto";
};

void AddProgressOption(CLI::App& command, std::string& progress) {
  command
      .add_option("--progress", progress,
                  "Progress on standard error while it works (after its first second): bar (one line redrawn in "
                  "place), lines (a JSON object per line: phase, elapsed_s, best_s, bound_s, gap, nodes, done, total), "
                  "none, or auto (bar on a terminal, else lines)")
      ->check(CLI::IsMember({"auto", "bar", "lines", "none"}))
      ->capture_default_str();
}

Result<Problem> LoadProblemOrExample(const std::string& path, std::string& shown) {
  if (!path.empty()) {
    shown = path;
    return LoadProblemFile(path);
  }
  shown = BuiltinExampleName();
  Result<Json> doc = ParseDocument(BuiltinExampleText(), "problem.yaml");
  if (!doc.ok()) return doc.error();
  return ReadProblem(doc.value(), BuiltinExampleName());
}

// Builds the problem from --model, --device and the setup; `lines` gets what the report says
// about where the costs came from.
Result<Problem> BuildModelProblem(const ModelArgs& args, std::vector<std::pair<std::string, std::string>>& lines,
                                  OutputFiles& files, const std::vector<TargetKind>& targets) {
  Result<ModelSpec> model = LoadModel(args.model);
  if (!model.ok()) return model.error();
  Result<DeviceSpec> device = LoadDevice(args.device);
  if (!device.ok()) return device.error();
  TrainingSetup setup = args.setup;
  setup.schedule = ScheduleFromName(args.schedule).value();
  if (!args.recompute_given) AddTargetRecomputeOptions(targets, setup.recompute);
  if (Status reserved = SetReservedBytes(args.reserved_gb, setup); !reserved.ok()) return reserved.error();
  if (Status words = ApplySetupWords(args.words, setup); !words.ok()) return words.error();
  std::vector<std::string> host_notes;
  Result<Problem> problem = BuildProblem(model.value(), device.value(), setup, &host_notes);
  if (!problem.ok()) return problem.error();
  const ParameterCounts counts = CountParameters(model.value());
  lines.push_back({"model", fmt::format("{} ({}, {:.2f} B parameters, {} layers)", args.model, model.value().family,
                                        static_cast<double>(counts.total) / 1e9, model.value().layers)});
  lines.push_back({"costs", fmt::format("analytic model on {}{}", device.value().name,
                                        device.value().approximate ? " (approximate device figures)" : "")});
  for (const std::string& note : model.value().not_modeled) lines.push_back({"not modeled", note});
  for (const std::string& note : host_notes) lines.push_back({"host memory", note});
  if (!args.dump_problem.empty()) {
    files.Add(args.dump_problem, ProblemJsonText(problem.value(), ""));
    lines.push_back({"problem", "written to " + args.dump_problem});
  }
  return problem;
}

std::string TargetHelp() {
  std::string help = "The framework that will run the plan; the plan is the best it runs unmodified (default: the "
                     "--export format's framework, else any). A training setup the framework cannot run (e.g. "
                     "DeepSpeed with --zero 2 or 3, torchtitan with --precision fp8) is refused with the fix "
                     "(docs/targets.md, \"Training setups\"):";
  for (const Target& t : Targets()) help += fmt::format("\n  {}: {}", t.name, t.framework);
  return help;
}

// The target a command plans for: --target, else the framework --export writes for, else any.
struct ChosenTarget {
  TargetKind kind = TargetKind::kAny;
  std::string why;  // how it was chosen, for the report
};
Result<ChosenTarget> ChooseTarget(const std::string& target, const std::optional<FrameworkId>& format) {
  if (!target.empty()) {
    Result<TargetKind> kind = ParseTarget(target);
    if (!kind.ok()) return kind.error();
    return ChosenTarget{kind.value(), "--target"};
  }
  if (format) return ChosenTarget{DefaultTarget(*format), "the default for --export " + FormatNames()[static_cast<int>(*format)]};
  return ChosenTarget{TargetKind::kAny, "the default; --target names a framework"};
}

// The report's lines on the target, and on what the per-layer plan would gain over it.
// The chosen target must run the problem's training setup (TargetRunsSetup).
Status TargetRunsProblemSetup(TargetKind kind, const Problem& problem) {
  return problem.training ? TargetRunsSetup(kind, *problem.training, &problem.pipeline) : Status{};
}

std::vector<std::pair<std::string, std::string>> TargetLines(const ChosenTarget& chosen, const TargetPlan& planned,
                                                             const std::optional<TargetPlan>& any) {
  const Target& target = TargetOf(chosen.kind);
  std::vector<std::pair<std::string, std::string>> lines;
  lines.push_back({"target", fmt::format("{}: {} ({})", target.name, target.framework, chosen.why)});
  if (!planned.setting.empty()) {
    lines.push_back({"setting", fmt::format("{} (the best of {} settings)", planned.setting, planned.settings)});
  }
  if (any && any->planner.status != PlanStatus::kInfeasible && any->planner.status != PlanStatus::kNoPlan &&
      planned.planner.status != PlanStatus::kInfeasible && planned.planner.status != PlanStatus::kNoPlan) {
    const double gain = static_cast<double>(planned.planner.iteration_ns) / static_cast<double>(any->planner.iteration_ns);
    lines.push_back({"per-layer", fmt::format("{} ({:.3f}x this plan{}), with per-layer recomputation that {} "
                                                   "cannot run unmodified: --target any",
                                                   FormatDuration(any->planner.iteration_ns), gain,
                                                   any->planner.status == PlanStatus::kOptimal ? ", proven optimal" : "",
                                                   target.name)});
  } else if (any && planned.planner.status == PlanStatus::kInfeasible && any->planner.status != PlanStatus::kInfeasible &&
             any->planner.status != PlanStatus::kNoPlan) {
    lines.push_back({"per-layer", fmt::format("{} fits, with per-layer recomputation {} cannot run unmodified: "
                                                   "--target any",
                                                   FormatDuration(any->planner.iteration_ns), target.name)});
  }
  return lines;
}

int RunPlan(const PlanArgs& args) {
  // --time-limit bounds the whole command, from here.
  const Deadline command = Deadline::In(args.time_limit_s);
  std::string shown;
  std::vector<std::pair<std::string, std::string>> origin;
  if (!args.sapp.empty() &&
      (args.sapp_target.stages < 1 || args.sapp_target.micro_batches < 1 || args.sapp_target.memory_mb <= 0)) {
    return Fail(InvalidInput("--sapp needs the pipeline to plan: -s STAGES -mb MICRO_BATCHES -mem MEMORY_MB (as the "
                             "MindFormers tool takes them), e.g. -s 16 -mb 16 -mem 56000"));
  }
  // A user of the MindFormers tool gets the lists to paste into the MindFormers configuration.
  const std::string export_format = args.export_format.empty() && !args.sapp.empty() ? "mindformers" : args.export_format;
  std::optional<FrameworkId> format;
  if (!export_format.empty()) {
    Result<FrameworkId> parsed = ParseFormat(export_format);
    if (!parsed.ok()) return Fail(parsed.error());
    format = parsed.value();
  }
  if (!args.lp_file.empty() && args.solver != "cbc") {
    return Fail(InvalidInput("--lp-file writes the integer program CBC solves; add --solver cbc"));
  }
  Result<ChosenTarget> chosen = ChooseTarget(args.target, format);
  if (!chosen.ok()) return Fail(chosen.error());
  OutputFiles files;
  Result<Problem> problem = !args.sapp.empty()           ? LoadSappProblem(args.sapp, args.sapp_target)
                            : args.model.model.empty() ? LoadProblemOrExample(args.problem, shown)
                                                       : BuildModelProblem(args.model, origin, files, {chosen.value().kind});
  if (!problem.ok()) return Fail(problem.error());
  const Problem& pb = problem.value();
  if (Status runs = TargetRunsProblemSetup(chosen.value().kind, pb); !runs.ok()) return Fail(runs.error());
  if (Status size = CheckSvg(args.svg, pb, 1); !size.ok()) return Fail(size.error());
  if (Status size = CheckTraceSize(pb); !args.trace.empty() && !size.ok()) return Fail(size.error());
  if (!args.sapp.empty()) {
    origin.push_back({"problem", "the MindFormers pipeline-balance tool's input " + args.sapp});
    origin.push_back({"memory", fmt::format("stage constant {} on every rank (counted once; the tool adds it again on "
                                            "the first and last stage)",
                                            FormatBytes(pb.reserved_bytes))});
  }
  if (origin.empty()) origin.push_back({"problem", shown + (pb.name.empty() ? "" : " (" + pb.name + ")")});
  PlannerOptions options;
  options.kind = args.solver == "cbc"           ? PlannerKind::kCbc
                 : args.solver == "brute-force" ? PlannerKind::kBruteForce
                                                : PlannerKind::kBranchAndBound;
  options.time_limit_name = fmt::format("time limit {:g} s", args.time_limit_s);
  options.deadline = InterruptDeadline();
  options.node_limit = args.node_limit;
  options.write_lp = !args.lp_file.empty();
  ProgressPrinter printer(std::cerr, ProgressModeOf(args.progress, isatty(STDERR_FILENO) != 0), "plan");
  options.progress = printer.Sink();
  StopOnInterrupt();
  // With a framework target, its plan gets three quarters of the time and the per-layer plan it
  // is compared with the rest.
  const bool also_any = chosen.value().kind != TargetKind::kAny;
  options.time_limit_s = command.SecondsLeft() * (also_any ? 0.75 : 1.0);
  Result<TargetPlan> planned = PlanForTarget(pb, chosen.value().kind, options);
  if (!planned.ok()) return Fail(planned.error());
  std::optional<TargetPlan> any;
  if (also_any) {
    options.time_limit_s = command.SecondsLeft();
    if (options.progress) {
      options.progress = [&printer](const Progress& p) {
        Progress q = p;
        q.phase = "the per-layer plan to compare with: " + p.phase;
        printer.Report(q);
      };
    }
    Result<TargetPlan> unrestricted = PlanForTarget(pb, TargetKind::kAny, options);
    if (!unrestricted.ok()) return Fail(unrestricted.error());
    any = unrestricted.value();
  }
  printer.Finish();
  planned.value().planner.stopped_by = StoppedBy(planned.value().planner.stopped_by, options.time_limit_name);
  const PlannerResult& r = planned.value().planner;
  if (r.status == PlanStatus::kInfeasible) {
    for (const auto& [label, value] : TargetLines(chosen.value(), planned.value(), any)) {
      std::cerr << "bmpipe: " << label << ": " << value << "\n";
    }
    const bool any_fits = any && (any->planner.status == PlanStatus::kOptimal || any->planner.status == PlanStatus::kFeasible);
    if (any_fits) {
      // The problem fits; the target's settings do not.
      std::cerr << "bmpipe: no plan " << TargetOf(chosen.value().kind).name
                << " runs unmodified fits in memory: its recomputation settings save too little here; another --target, "
                   "or the problem's options (a 'full' option for Megatron's full recomputation) would help\n";
      return kExitNoFit;
    }
    std::cerr << "bmpipe: " << DescribeShortfall(pb, DiagnoseMemory(pb)) << "\n";
    if (!args.model.model.empty()) {
      const TrainingSetup& s = args.model.setup;
      std::cerr << "bmpipe: in the setup's terms: more pipeline stages (--pp) or tensor parallelism (--tp)"
                << (ZeroStage(s) < 1 ? ", --distributed-optimizer" : (ZeroStage(s) < 3 ? ", a higher --zero" : ""))
                << (s.sequence_parallel || s.tp == 1 ? "" : ", --sequence-parallel")
                << (s.flash_attention ? "" : ", --flash-attn") << ", or a smaller --mbs\n";
    }
    for (const auto& [label, value] : origin) {
      if (label == "not modeled") std::cerr << "bmpipe: note: not modeled: " << value << "\n";
    }
    return kExitNoFit;
  }
  if (r.status == PlanStatus::kNoPlan) {
    std::cerr << "bmpipe: no plan found: the search was stopped by " << r.stopped_by
              << " before it found a plan that fits" << (g_interrupted.load() ? "" : "; raise --time-limit") << "\n";
    return kExitNoPlan;
  }
  const SimResult sim = SimulatePlan(pb, r.plan).value();
  const SolverInfo solver = SolverInfoOf(r);
  ReportHeader header{"bmpipe plan", origin};
  for (auto& line : TargetLines(chosen.value(), planned.value(), any)) header.lines.push_back(line);
  for (auto& line : PlannerLines(r)) header.lines.push_back(line);
  if (!args.svg.path.empty()) {
    Status written = StageSvg(files, args.svg, pb, "bmpipe plan: " + (pb.name.empty() ? shown : pb.name),
                              {{"bmpipe (" + std::string(r.status == PlanStatus::kOptimal ? "proven optimal" : "best found") + ")",
                                r.plan}});
    if (!written.ok()) return Fail(written.error());
    header.lines.push_back({"timeline", "written to " + args.svg.path});
  }
  if (!args.trace.empty()) {
    Status written = StageTrace(files, args.trace, pb, r.plan, "bmpipe plan: " + (pb.name.empty() ? shown : pb.name), header);
    if (!written.ok()) return Fail(written.error());
  }
  std::string exported;
  if (format) {
    Result<std::string> text = ExportPlan(pb, r.plan, *format, chosen.value().kind);
    if (!text.ok()) return Fail(text.error());
    exported = text.value();
    if (!args.export_out.empty()) {
      files.Add(args.export_out, exported);
      header.lines.push_back({"export", export_format + " written to " + args.export_out});
      exported.clear();
    }
  }
  if (!args.lp_file.empty()) {
    files.Add(args.lp_file, r.lp_text);
    header.lines.push_back({"integer program", "written to " + args.lp_file});
  }
  const int code = Emit(files, args.out, args.json, PlanJsonText(pb, r.plan, sim, solver),
                        FormatReport(header, pb, r.plan, sim));
  if (code == kExitOk && !exported.empty()) std::cout << "\n" << exported;
  return code;
}

struct ExportArgs {
  std::string problem;
  std::string plan;
  std::string plan_format;  // empty: detected from the content
  std::string to;
  std::string target;
  std::string out;
};

int RunExport(const ExportArgs& args) {
  Result<Problem> problem = LoadProblemFile(args.problem);
  if (!problem.ok()) return Fail(problem.error());
  std::optional<PlanFormat> plan_format;
  if (!args.plan_format.empty()) {
    Result<PlanFormat> parsed = ParsePlanFormat(args.plan_format);
    if (!parsed.ok()) return Fail(parsed.error());
    plan_format = parsed.value();
  }
  Result<LoadedPlan> plan = LoadAnyPlan(args.plan, plan_format, problem.value());
  if (!plan.ok()) return Fail(plan.error());
  Result<FrameworkId> format = ParseFormat(args.to);
  if (!format.ok()) return Fail(format.error());
  Result<ChosenTarget> chosen = ChooseTarget(args.target, format.value());
  if (!chosen.ok()) return Fail(chosen.error());
  Result<std::string> text = ExportPlan(problem.value(), plan.value().document.plan, format.value(), chosen.value().kind);
  if (!text.ok()) return Fail(text.error());
  if (!TargetRunsPlan(problem.value(), plan.value().document.plan, chosen.value().kind)) {
    std::cerr << "bmpipe: warning: " << TargetOf(chosen.value().kind).name
              << " cannot run this plan as planned (its recomputation is not one of the target's settings, or a stage "
                 "is one it cannot express); the export says what it writes instead\n";
  }
  if (!args.out.empty()) {
    Status written = WriteFileAtomically(args.out, text.value());
    return written.ok() ? kExitOk : Fail(written.error());
  }
  std::cout << text.value();
  return kExitOk;
}

struct CompareArgs {
  std::string problem;
  std::string target;
  ModelArgs model;
  double time_limit_s = 60;
  bool json = false;
  std::string out;
  std::vector<std::string> baselines;
  SvgOptions svg;
  std::string progress = "auto";
};

int RunCompare(const CompareArgs& args) {
  std::string shown;
  std::vector<std::pair<std::string, std::string>> origin;
  OutputFiles files;
  Result<ChosenTarget> chosen = ChooseTarget(args.target, std::nullopt);
  if (!chosen.ok()) return Fail(chosen.error());
  const TargetKind megatron_spec = chosen.value().kind == TargetKind::kMegatronLocal ? TargetKind::kMegatronLocal : TargetKind::kMegatron;
  Result<Problem> problem = args.model.model.empty() ? LoadProblemOrExample(args.problem, shown)
                                                     : BuildModelProblem(args.model, origin, files,
                                                                         {chosen.value().kind, megatron_spec});
  if (!problem.ok()) return Fail(problem.error());
  const Problem& pb = problem.value();
  if (Status runs = TargetRunsProblemSetup(chosen.value().kind, pb); !runs.ok()) return Fail(runs.error());
  if (origin.empty()) origin.push_back({"problem", shown + (pb.name.empty() ? "" : " (" + pb.name + ")")});
  if (Status size = CheckSvg(args.svg, pb, 2); !size.ok()) return Fail(size.error());
  CompareOptions options;
  options.time_limit_s = args.time_limit_s;
  options.target = chosen.value().kind;
  if (!args.baselines.empty()) {
    options.baselines.clear();
    for (const std::string& name : args.baselines) {
      bool found = false;
      for (BaselineKind kind : AllBaselines()) {
        if (BaselineName(kind) == name) {
          options.baselines.push_back(kind);
          found = true;
        }
      }
      if (!found) {
        std::vector<std::string> names;
        for (BaselineKind kind : AllBaselines()) names.push_back(BaselineName(kind));
        return Fail(InvalidInput(fmt::format("--baselines: unknown planner '{}'{}; planners: {}", name,
                                             DidYouMean(name, names), fmt::join(names, ", "))));
      }
    }
  }
  ProgressPrinter printer(std::cerr, ProgressModeOf(args.progress, isatty(STDERR_FILENO) != 0), "compare");
  options.progress = printer.Sink();
  options.deadline = InterruptDeadline();
  StopOnInterrupt();
  Result<std::vector<CompareRow>> rows = Compare(pb, options);
  printer.Finish();
  if (!rows.ok()) return Fail(rows.error());
  for (CompareRow& row : rows.value()) row.note = StoppedBy(row.note, fmt::format("time limit {:g} s", args.time_limit_s));
  if (!args.svg.path.empty()) {
    // bmpipe's plan above Megatron's best, on one time scale.
    std::vector<std::pair<std::string, Plan>> plans;
    for (const CompareRow& row : rows.value()) {
      if ((row.name == "bmpipe" || row.name == "megatron") && row.has_plan) plans.push_back({row.name + ": " + row.note, row.plan});
    }
    Status written = StageSvg(files, args.svg, pb, "bmpipe compare: " + (pb.name.empty() ? shown : pb.name), plans);
    if (!written.ok()) return Fail(written.error());
    origin.push_back({"timeline", "bmpipe and megatron written to " + args.svg.path});
  }
  const Target& target = TargetOf(options.target);
  origin.push_back({"target", fmt::format("{}: {} ({}); megatron is stock {} at its best layout and recomputation",
                                          target.name, target.framework, chosen.value().why,
                                          options.target == TargetKind::kMegatronLocal ? "Megatron-Core, local spec"
                                                                                       : "Megatron-Core, Transformer Engine spec")});
  std::string title = "bmpipe compare";
  for (const auto& [label, value] : origin) title += fmt::format("\n  {:<10} {}", label, value);
  return Emit(files, args.out, args.json, CompareToJson(pb, rows.value()).dump(2) + "\n",
              FormatCompare(title, pb, rows.value()));
}

struct SearchArgs {
  std::string model;
  std::string device;
  SearchOptions options;
  SetupWords words;
  std::vector<std::string> precisions;  // --precision, a list
  std::vector<std::string> schedules;   // --schedules, a list
  std::string mfu_attention = "causal";
  double reserved_gb = -1;
  bool json = false;
  bool quiet = false;
  std::string progress = "auto";
  std::string out;
  std::string plan_out;
  std::string export_format = "megatron";
  bool export_given = false;     // --export was on the command line
  bool recompute_given = false;  // --recompute was on the command line
  std::string target;
  std::string export_out;
  SvgOptions svg;
};

int RunSearch(SearchArgs& args) {
  if (args.svg.path.empty() && (!args.svg.window.empty() || !args.svg.ranks.empty())) {
    return Fail(InvalidInput("--svg-window and --svg-ranks need --svg FILE"));
  }
  Result<ModelSpec> model = LoadModel(args.model);
  if (!model.ok()) return Fail(model.error());
  Result<DeviceSpec> device = LoadDevice(args.device);
  if (!device.ok()) return Fail(device.error());
  SearchOptions& options = args.options;
  if (Status reserved = SetReservedBytes(args.reserved_gb, options.base); !reserved.ok()) return Fail(reserved.error());
  if (Status words = ApplySetupWords(args.words, options.base); !words.ok()) return Fail(words.error());
  options.mfu_attention = args.mfu_attention == "full" ? AttentionFlops::kFull : AttentionFlops::kCausal;
  for (const std::string& p : args.precisions) {
    options.precision.push_back(ParsePrecision(p).value_or(Precision::kBf16));
  }
  for (const std::string& name : args.schedules) options.schedules.push_back(ScheduleFromName(name).value());
  std::optional<FrameworkId> format;
  if (!args.export_format.empty() && args.export_format != "none") {
    Result<FrameworkId> parsed = ParseFormat(args.export_format);
    if (!parsed.ok()) return Fail(parsed.error());
    format = parsed.value();
  }
  // The target: --target, else that of an --export given, else any (the default export is then
  // Megatron's closest setting to the per-layer plan).
  Result<ChosenTarget> chosen = ChooseTarget(args.target, args.export_given ? format : std::nullopt);
  if (!chosen.ok()) return Fail(chosen.error());
  options.target = chosen.value().kind;
  if (!args.recompute_given) AddTargetRecomputeOptions({options.target}, options.base.recompute);
  ProgressPrinter printer(std::cerr, args.quiet ? ProgressMode::kNone : ProgressModeOf(args.progress, isatty(STDERR_FILENO) != 0),
                          "search");
  options.progress = printer.Sink();
  options.deadline = InterruptDeadline();
  StopOnInterrupt();
  Result<SearchResult> searched = SearchConfigurations(model.value(), device.value(), options);
  printer.Finish();
  if (!searched.ok()) return Fail(searched.error());
  const SearchResult& result = searched.value();

  const ModelSpec& m = model.value();
  const DeviceSpec& d = device.value();
  std::vector<std::pair<std::string, std::string>> header;
  header.push_back({"model", fmt::format("{} ({}, {:.2f} B parameters, {} layers)", args.model, m.family,
                                         static_cast<double>(CountParameters(m).total) / 1e9, m.layers)});
  header.push_back({"cluster", fmt::format("{} x {}, {} per node{}", options.devices, d.name, d.devices_per_node,
                                           d.approximate ? " (approximate device figures)" : "")});
  header.push_back({"batch", fmt::format("{} sequences x {} tokens = {:.2f} M tokens per iteration{}",
                                         options.base.global_batch_size, options.base.seq,
                                         static_cast<double>(options.base.global_batch_size) * options.base.seq / 1e6,
                                         options.base.flash_attention ? ", flash attention" : "")});
  const Target& target = TargetOf(options.target);
  header.push_back({"target", fmt::format("{}: {} ({})", target.name, target.framework, chosen.value().why)});
  header.push_back({"recompute", fmt::format("{}, from: {}",
                                             target.granularity == RecomputeGranularity::kPerLayer ? "per layer"
                                             : target.granularity == RecomputeGranularity::kPerStage
                                                 ? "per-stage counts"
                                                 : "one global setting",
                                             fmt::join(options.base.recompute, ", "))});
  header.push_back({"planner", options.exhaustive
                                   ? std::string("exhaustive: every valid configuration planned, no bound used")
                                   : fmt::format("{} after screening, branch and bound with {} nodes each after its "
                                                 "first plans",
                                                 options.plan_count < 0
                                                     ? std::string("every configuration not ruled out")
                                                     : fmt::format("the {} most promising configurations", options.plan_count),
                                                 options.node_limit < 0 ? std::string("no limit on") : std::to_string(options.node_limit))});
  for (const std::string& note : m.not_modeled) header.push_back({"not modeled", note});
  std::string report = FormatSearch(header, options, result);
  OutputFiles files;
  std::string exported;
  std::optional<Error> export_error;
  Json doc = SearchDocument(m, d, options, result);
  if (!result.ranking.empty()) {
    const ConfigOutcome& best = result.configs[result.ranking[0]];
    const Problem problem = BuildProblem(m, d, SetupOf(options, best.config)).value();
    const SimResult sim = SimulatePlan(problem, best.planner.plan).value();
    const std::string plan_json = doc["best_plan"].dump(2) + "\n";
    ReportHeader plan_header{"The best configuration's plan",
                             {{"setup", DescribeConfig(best.config)}, {"launch", MegatronFlags(options, best.config)}}};
    if (!best.setting.empty()) plan_header.lines.push_back({"setting", best.setting});
    for (auto& line : PlannerLines(best.planner)) plan_header.lines.push_back(line);
    if (!args.plan_out.empty()) {
      files.Add(args.plan_out, plan_json);
      plan_header.lines.push_back({"plan", "written to " + args.plan_out});
    }
    if (!args.svg.path.empty()) {
      Status written = StageSvg(files, args.svg, problem, "bmpipe search: " + problem.name,
                                {{DescribeConfig(best.config), best.planner.plan}});
      if (!written.ok()) return Fail(written.error());
      plan_header.lines.push_back({"timeline", "written to " + args.svg.path});
    }
    // Megatron, the default export, runs no split-backward schedule: a winner with one is exported
    // as its op order (torch.distributed.pipelining's CSV) unless --export names a format.
    std::string export_name = args.export_format;
    if (format && !args.export_given && problem.pipeline.Copies() > 1) {
      format.reset();  // no format takes it: say so, not as an error
      plan_header.lines.push_back({"export", fmt::format("none: {}", kNoFrameworkRunsDualPipe)});
    } else if (format && !args.export_given && problem.pipeline.SplitBackward()) {
      format = FrameworkId::kTorch;
      export_name = "csv";
      plan_header.lines.push_back({"export", fmt::format("csv, the op order for torch.distributed.pipelining (the "
                                                         "default Megatron export runs no '{}')",
                                                         ScheduleName(problem.pipeline.schedule))});
    }
    if (format) {
      // A failed export leaves the search's results standing: they are written, then the export's
      // error is reported with its exit code.
      Result<std::string> text = ExportPlan(problem, best.planner.plan, *format, options.target);
      if (!text.ok()) {
        export_error = text.error();
        plan_header.lines.push_back({"export", export_name + " failed: " + text.error().message});
      } else {
        exported = text.value();
        if (!args.export_out.empty()) {
          files.Add(args.export_out, exported);
          plan_header.lines.push_back({"export", export_name + " written to " + args.export_out});
          exported.clear();
        }
      }
    }
    report += "\n" + FormatReport(plan_header, problem, best.planner.plan, sim);
  }
  if (result.ranking.empty()) {
    // Why every configuration failed is still worth reading; no file is written.
    std::cout << (args.json ? doc.dump(2) + "\n" : report);
    if (result.interrupted) {
      std::cerr << "bmpipe: no plan found: interrupted (Ctrl-C) before a configuration was planned\n";
      return kExitNoPlan;
    }
    if (result.budget_exhausted && options.time_budget_s > 0) {
      std::cerr << "bmpipe: no plan found: the time budget ran out before a configuration was planned; raise "
                   "--time-budget or restrict the space (--tp, --pp, --vpp, --mbs)\n";
      return kExitNoPlan;
    }
    std::cerr << "bmpipe: no configuration fits in memory; more devices, a shorter --seq, a smaller --gbs or more "
                 "recomputation options (--recompute) would help\n";
    return kExitNoFit;
  }
  const int code = Emit(files, args.out, args.json, doc.dump(2) + "\n", report);
  if (code == kExitOk && !args.json && !exported.empty()) std::cout << "\n" << exported;
  // The default export (no --export given) is a courtesy: its failure is reported, not an error.
  if (code == kExitOk && export_error && args.export_given) {
    std::cerr << "bmpipe: the search's report and files were written, but the --export " << args.export_format
              << " failed: " << export_error->message << "; --target " << args.export_format
              << " searches for plans it can express\n";
    return export_error->kind == ErrorKind::kInvalidInput ? kExitBadInput : Fail(*export_error);
  }
  return code;
}

int RunValidate(const std::string& path, bool json, bool markdown, const std::string& out) {
  if (json && markdown) return Fail(InvalidInput("give --json or --markdown, not both"));
  Result<RunTable> table = LoadRunTable(path);
  if (!table.ok()) return Fail(table.error());
  Result<Validation> v = Validate(table.value());
  if (!v.ok()) return Fail(v.error());
  OutputFiles files;
  return Emit(files, out, json, ValidationToJson(table.value(), v.value()).dump(2) + "\n",
              markdown ? ValidationMarkdown(table.value(), v.value()) : FormatValidation(table.value(), v.value()));
}

struct ProfileArgs {
  std::vector<std::string> traces;  // OPTION=FILE
  Pipeline pipeline;  // ranks, chunks, micro-batches
  std::string schedule = "1f1b";
  double memory_gb = 0;
  double reserved_gb = 0;
  double p2p_ms = 0;
  double optimizer_bytes = 0;
  std::string out;
};

int RunProfile(const ProfileArgs& args) {
  if (!(args.optimizer_bytes >= 0)) {
    return Fail(InvalidInput(fmt::format("--optimizer-bytes-per-param {:g}: give bytes, 0 or more (12 for Adam with fp32 "
                                         "master weights and moments)",
                                         args.optimizer_bytes)));
  }
  Result<Problem> base = TraceBaseProblem(args.pipeline.ranks, args.pipeline.chunks, args.pipeline.micro_batches,
                                          args.schedule, args.memory_gb * 1e9, args.reserved_gb * 1e9, args.p2p_ms / 1e3);
  if (!base.ok()) return Fail(base.error());
  std::vector<TraceOption> traces;
  for (const std::string& t : args.traces) {
    const std::size_t eq = t.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == t.size()) {
      return Fail(InvalidInput(fmt::format("--trace {}: give OPTION=FILE, the recomputation option the traced steps ran "
                                           "and the trace, e.g. none=trace.json",
                                           t)));
    }
    const std::string option = t.substr(0, eq), path = t.substr(eq + 1);
    if (!ParseRecompute(option).ok()) return Fail(InvalidInput("--trace " + t + ": " + ParseRecompute(option).error().message));
    Result<Json> doc = LoadDocument(path);
    if (!doc.ok()) return Fail(doc.error());
    traces.push_back({option, path, std::move(doc).value()});
  }
  Result<Problem> problem = ProblemFromTraces(traces, base.value(), args.optimizer_bytes);
  if (!problem.ok()) return Fail(problem.error());
  const std::string text = ProblemJsonText(problem.value(), "profiled by bmpipe profile from PyTorch profiler traces");
  if (!args.out.empty()) {
    Status written = WriteFileAtomically(args.out, text);
    if (!written.ok()) return Fail(written.error());
    std::cerr << "bmpipe: problem of " << problem.value().num_layers() << " layers written to " << args.out
              << "; plan it with: bmpipe plan --problem " << args.out << "\n";
    return kExitOk;
  }
  std::cout << text;
  return kExitOk;
}

struct CalibrateArgs {
  std::string runs;
  std::vector<std::string> fit;
  std::string device_out;
  bool json = false;
  std::string out;
};

int RunCalibrate(const CalibrateArgs& args) {
  Result<RunTable> table = LoadRunTable(args.runs);
  if (!table.ok()) return Fail(table.error());
  Result<DeviceCalibration> c = CalibrateDevice(table.value(), args.fit);
  if (!c.ok()) return Fail(c.error());
  OutputFiles files;
  std::string report = FormatCalibration(table.value(), c.value());
  if (!args.device_out.empty()) {
    files.Add(args.device_out, CalibratedDeviceYaml(table.value(), c.value()));
    report += "\ndevice file written to " + args.device_out + " (use it as --device " + args.device_out + ")\n";
  } else {
    report += "\n" + CalibratedDeviceYaml(table.value(), c.value());
  }
  return Emit(files, args.out, args.json, CalibrationToJson(table.value(), c.value()).dump(2) + "\n", report);
}

std::string Joined(const std::vector<std::string>& names) { return fmt::format("{}", fmt::join(names, ", ")); }

// The help texts of the setup's parallel sizes and switches that `search` takes as lists of
// values to try and the other commands as one value.
constexpr const char* kCpHelp = "Context-parallel size: the sequence split over cp ranks (ring attention; needs --flash-attn)";
constexpr const char* kEpHelp =
    "Expert-parallel size: each MoE layer's routed experts split over ep ranks (ep x etp divides tp x cp x dp)";
constexpr const char* kEtpHelp = "Expert tensor-parallel size (default: the same as --tp)";
constexpr const char* kPrecisionHelp =
    "GEMM precision of the linear layers: bf16, or fp8 (Transformer Engine; 2 more bytes per parameter for its weight "
    "caches)";
constexpr const char* kZeroHelp =
    "ZeRO stage: 0, 1 (optimizer state sharded over dp x cp, as --distributed-optimizer), 2 (and gradients), 3 (and "
    "parameters: FSDP)";

// Context and expert parallelism, the precision and the ZeRO stage, one value each (plan,
// simulate, compare); `wrap` puts each option in its group.
template <typename Wrap>
void AddParallelOptions(CLI::App& cmd, TrainingSetup& setup, SetupWords& words, Wrap wrap) {
  wrap(cmd.add_option("--cp", setup.cp, kCpHelp)->capture_default_str());
  wrap(cmd.add_option("--ep", setup.ep, kEpHelp)->capture_default_str());
  wrap(cmd.add_option("--etp", setup.etp, kEtpHelp));
  wrap(cmd.add_option("--precision", words.precision, kPrecisionHelp)
           ->check(CLI::IsMember({"bf16", "fp8"}))
           ->capture_default_str());
  wrap(cmd.add_option("--zero", setup.zero, kZeroHelp)->check(CLI::Range(0, 3))->capture_default_str());
}

// MoE routing, state dtypes, overlap, offloading and headroom (every command with a cost model).
template <typename Wrap>
void AddSetupOptions(CLI::App& cmd, TrainingSetup& setup, SetupWords& words, Wrap wrap) {
  wrap(cmd.add_option("--moe-imbalance", setup.moe_imbalance,
                      "Dropless MoE: the busiest expert's tokens over the even share")
           ->capture_default_str());
  wrap(cmd.add_option("--moe-capacity-factor", setup.moe_capacity_factor,
                      "MoE expert capacity over the even share (0: dropless, then --moe-imbalance applies)")
           ->capture_default_str());
  wrap(cmd.add_option("--moe-dispatcher", words.moe_dispatcher,
                      "How MoE tokens reach their experts: alltoall (Megatron's all-to-all, every routed copy) or flex "
                      "(DeepEP/HybridEP: once to each node holding one of the token's experts, then over NVLink)")
           ->check(CLI::IsMember({"alltoall", "flex"}))
           ->capture_default_str());
  wrap(cmd.add_option("--ep-comm-overlap", setup.ep_comm_overlap,
                      "Fraction of the MoE dispatch and combine hidden behind another micro-batch's compute (0..1; "
                      "Megatron's --overlap-moe-expert-parallel-comm)")
           ->capture_default_str());
  wrap(cmd.add_flag("--moe-cuda-graphs", setup.moe_cuda_graphs,
                    "The MoE router and the dispatch preprocessing replayed as CUDA graphs (Megatron's "
                    "--cuda-graph-impl transformer_engine --cuda-graph-scope moe_router moe_preprocess): each MoE "
                    "layer pass waits the device's moe_host_graphed_ms for the host instead of moe_host_ms plus "
                    "moe_host_expert_ms per expert on the rank"));
  wrap(cmd.add_option("--grad-dtype", words.grad_dtype, "Main gradients: fp32 or bf16")
           ->check(CLI::IsMember({"fp32", "bf16"}))
           ->capture_default_str());
  wrap(cmd.add_option("--optimizer-dtype", words.optimizer_dtype,
                      "Adam's moments: fp32 or bf16 (master weights stay fp32)")
           ->check(CLI::IsMember({"fp32", "bf16"}))
           ->capture_default_str());
  wrap(cmd.add_flag("--fp8-params", setup.fp8_params,
                    "With --precision fp8: the linear layers' weights kept in FP8 (1 byte and a 1-byte transpose "
                    "instead of 16-bit weights and Transformer Engine's FP8 caches; the parameter all-gathers move "
                    "FP8): Megatron's --fp8-param-gather, which needs the distributed optimizer"));
  wrap(cmd.add_flag("--no-fp8-transpose-cache", setup.no_fp8_transpose_cache,
                    "With --precision fp8: the FP8 weights' transposes are not kept across micro-batches (a byte per "
                    "linear-layer parameter less, a transpose in every backward): Megatron's "
                    "--disable-parameter-transpose-cache"));
  wrap(cmd.add_option("--tp-comm-overlap", setup.tp_comm_overlap,
                      "Fraction of the tensor-parallel collectives hidden behind GEMMs (0..1; Megatron's default "
                      "is 0, --tp-comm-overlap with userbuffers hides most)")
           ->capture_default_str());
  wrap(cmd.add_option("--offload", words.offload,
                      "What goes to host memory (comma-separated): activations (offered per layer beside "
                      "recomputation), optimizer (state and step on the CPU), optimizer-moments (Adam's moments "
                      "and the step on the CPU, the fp32 master weights kept on the device: Megatron's offload without "
                      "the precision-aware optimizer)")
           ->delimiter(',')
           ->check(CLI::IsMember({"activations", "optimizer", "optimizer-moments"})));
  wrap(cmd.add_option("--memory-headroom-gb", words.headroom_gb,
                      "Memory every rank must leave free beyond the reserve, in GB")
           ->capture_default_str());
}

// --model, --device and the training setup: the problem from the analytic cost model.
void AddModelOptions(CLI::App& cmd, ModelArgs& m, CLI::Option* problem_opt) {
  const std::string group = "Cost model (instead of --problem)";
  CLI::Option* model = cmd.add_option("--model", m.model,
                                      "Model preset (" + Joined(ModelPresetNames()) +
                                          ") or a Hugging Face config.json")
                           ->group(group)
                           ->excludes(problem_opt);
  auto needs_model = [&](CLI::Option* o) { return o->group(group)->needs(model); };
  model->needs(needs_model(cmd.add_option("--device", m.device,
                                          "Device preset (" + Joined(DevicePresetNames()) +
                                              ") or a device file (JSON/YAML, docs/cost-model.md)")));
  needs_model(cmd.add_option("--tp", m.setup.tp, "Tensor-parallel size")->capture_default_str());
  needs_model(cmd.add_option("--pp", m.setup.pp, "Pipeline-parallel size (pipeline ranks)")->capture_default_str());
  needs_model(cmd.add_option("--dp", m.setup.dp, "Data-parallel size")->capture_default_str());
  needs_model(cmd.add_option("--vpp", m.setup.vpp,
                             "Model chunks per pipeline rank; > 1 runs interleaved 1F1B (2 with --schedule zb-v, "
                             "dualpipe or dualpipev, 2 or more with interleaved-zb)")
                  ->capture_default_str());
  needs_model(cmd.add_option("--mbs", m.setup.micro_batch_size, "Micro-batch size (sequences)")->capture_default_str());
  model->needs(needs_model(cmd.add_option("--gbs", m.setup.global_batch_size,
                                          "Global batch size (sequences per iteration); micro-batches = gbs / (mbs x dp)")));
  model->needs(needs_model(cmd.add_option("--seq", m.setup.seq, "Sequence length (tokens)")));
  needs_model(cmd.add_flag("--sequence-parallel", m.setup.sequence_parallel,
                           "Megatron sequence parallelism (norm, dropout and residual activations split over TP)"));
  needs_model(cmd.add_flag("--flash-attn", m.setup.flash_attention, "Fused (flash) attention: no s x s activations"));
  needs_model(cmd.add_flag("--distributed-optimizer", m.setup.distributed_optimizer,
                           "Shard optimizer state over data parallel (ZeRO-1): 6 + 12/dp bytes per parameter, not 18"));
  needs_model(cmd.add_option("--recompute", m.setup.recompute,
                             "Recomputation options offered for every decoder layer (comma-separated): " +
                                 Joined(RecomputeOptionNames()) +
                                 ", or unions such as selective+norm; by default also those the target's settings use")
                  ->delimiter(',')
                  ->capture_default_str()
                  ->each([&m](const std::string&) { m.recompute_given = true; }));
  {
    std::vector<std::string> names;
    std::string help = "Pipeline schedule (docs/semantics.md, \"Schedules\"):";
    for (const ScheduleTraits& t : kSchedules) {
      if (t.kind == ScheduleKind::kInterleavedOneFOneB) continue;  // 1f1b with --vpp > 1
      names.emplace_back(t.name);
      help += fmt::format(" {}: {};", t.name, t.summary);
    }
    help += " 1f1b with --vpp > 1 runs Megatron's interleaved 1F1B";
    needs_model(cmd.add_option("--schedule", m.schedule, help)->check(CLI::IsMember(names))->capture_default_str());
  }
  needs_model(cmd.add_option("--microbatch-group", m.setup.micro_batch_group,
                             "Interleaved 1F1B and interleaved ZB: micro-batches each chunk runs in a row (Megatron's "
                             "--microbatch-group-size-per-virtual-pipeline-stage; default --pp). Lets the micro-batch "
                             "count be any number of at least --pp")
                  ->check(CLI::PositiveNumber));
  needs_model(cmd.add_option("--reserved-gb", m.reserved_gb,
                             "Memory reserved on every device for the framework, in GB (default: 1 GiB + 5 % of the "
                             "device memory)")
                  ->check(CLI::NonNegativeNumber));
  needs_model(cmd.add_option("--dp-overlap", m.setup.dp_overlap,
                             "Fraction of the data-parallel gradient sync hidden behind the backward (0..1)")
                  ->capture_default_str());
  needs_model(cmd.add_option("--devices", m.setup.devices, "Total devices; checked against tp x cp x pp x dp"));
  AddParallelOptions(cmd, m.setup, m.words, needs_model);
  AddSetupOptions(cmd, m.setup, m.words, needs_model);
  needs_model(cmd.add_option("--dump-problem", m.dump_problem,
                             "Write the problem the cost model built (docs/file-formats.md) to this file, to re-run with "
                             "--problem, share or edit"));
}

int Main(int argc, char** argv) {
  CLI::App app{
      "bmpipe: pipeline-parallel planner for LLM training. It chooses the stage partition and per-layer "
      "recomputation together, and checks every plan with an exact simulation of the pipeline schedule.\n\n"
      "Exit codes: 0 success, 1 internal error, 2 bad command line or invalid input, 3 file not readable or "
      "writable, 4 no plan fits in memory (proven), 5 no plan found before the time limit, 6 the problem is too large "
      "for the memory available."};
  app.set_version_flag("--version", "bmpipe 0.1.0");
  app.require_subcommand(1);

  SimulateArgs sim;
  CLI::App* simulate = app.add_subcommand(
      "simulate",
      "Simulate a plan on a problem (docs/semantics.md) and print a per-stage and per-rank report: iteration time, bubble "
      "breakdown, memory per rank over its capacity. The problem comes from --problem FILE, or from --model, --device "
      "and a training setup (the analytic cost model), where the plan is Megatron-LM's for that configuration unless "
      "--plan is given: the way to check a row of `bmpipe validate` by hand.");
  CLI::Option* sim_problem =
      simulate->add_option("--problem", sim.problem, "Problem file (JSON or YAML, docs/file-formats.md)");
  simulate->add_option("--plan", sim.plan,
                       "Plan file: plan JSON or YAML (docs/file-formats.md), or a launcher configuration (a MindFormers YAML, "
                       "Megatron-LM arguments, the DeepSpeed module or torchtitan arguments bmpipe exports), detected "
                       "from the content");
  simulate->add_option("--plan-format", sim.plan_format,
                       "The --plan file's format instead of detecting it: json, mindformers, megatron, deepspeed, "
                       "torchtitan or csv (a schedule CSV is refused: it fixes no stages)");
  simulate->add_option("--strategy", sim.strategy,
                       "The plan when no --plan is given. megatron: Megatron-LM's split for the configuration (equal "
                       "decoder layers per stage, else the embedding and/or loss counted as a layer, else uneven first "
                       "and last stages) with one global --recompute setting; the default with --model. even: layers "
                       "split evenly, first option of every layer; the default with --problem")
      ->check(CLI::IsMember({"even", "megatron"}));
  simulate->add_flag("--json", sim.json, "Print the plan JSON with the simulated metrics instead of the report");
  simulate->add_option("--out", sim.out, "Also write the plan JSON with the simulated metrics to this file");
  AddSvgOptions(*simulate, sim.svg, "Write the timeline (ops per rank, memory over time) as SVG to this file");
  simulate->add_option("--trace", sim.trace, "Write the simulated timeline as a Chrome trace (JSON: one process per rank with its ops and a memory counter) to this file, to open in Perfetto or chrome://tracing beside a real profile");
  sim.model.setup.recompute = {"none"};
  AddModelOptions(*simulate, sim.model, sim_problem);
  simulate->get_option("--recompute")
      ->description("Megatron's global recomputation setting for every decoder layer: none, selective or full");

  std::string validate_table;
  bool validate_json = false, validate_markdown = false;
  std::string validate_out;
  CLI::App* validate = app.add_subcommand(
      "validate",
      "Check the analytic cost model against published training runs (data/published-runs.yaml, built in): fit the "
      "device efficiencies on the named calibration runs only, then predict every run's iteration time and memory "
      "with Megatron's plan for its configuration, and print predicted against measured, the error of each, and the "
      "mean and largest error over the held-out runs. docs/fidelity.md shows the result.");
  validate->add_option("--table", validate_table, "A run table in the same format instead of the built-in one");
  validate->add_flag("--json", validate_json,
                     "Print JSON: the calibration, the summaries, and every run with its source, what it states and "
                     "what is assumed");
  validate->add_flag("--markdown", validate_markdown, "Print the Markdown tables of docs/fidelity.md");
  validate->add_option("--out", validate_out, "Also write the JSON to this file");


  PlanArgs plan;
  CLI::App* plan_cmd = app.add_subcommand(
      "plan",
      "Choose the stage partition and each layer's recomputation option that minimize the simulated iteration time "
      "with every rank within memory, prove it optimal (or report the gap), and print the plan. The problem comes from "
      "--problem FILE, from --model/--device and a training setup (the analytic cost model), or from --sapp (the "
      "MindFormers pipeline-balance tool's input); with none of them, the built-in example (that tool's demo).");
  CLI::Option* problem_opt = plan_cmd->add_option("--problem", plan.problem, "Problem file (JSON or YAML, docs/file-formats.md)");
  plan_cmd->add_option("--out", plan.out, "Also write the plan JSON (docs/file-formats.md, with metrics) to this file");
  plan_cmd->add_flag("--json", plan.json, "Print the plan JSON instead of the report");
  CLI::Option* sapp = plan_cmd->add_option(
      "--sapp", plan.sapp,
      "Plan from the MindFormers pipeline-balance tool's input: its init YAML (dry-run memory, decomposed as the tool "
      "does; time_config) or its layer JSON; with -s, -mb, -mem (and -i) as that tool takes them. Prints the "
      "MindFormers lists to paste into the configuration.");
  sapp->excludes(problem_opt);
  plan_cmd->add_option("-s,--stages", plan.sapp_target.stages, "With --sapp: pipeline stages (the tool's -s)")->needs(sapp);
  plan_cmd->add_option("--mb,--micro-batches", plan.sapp_target.micro_batches, "With --sapp: micro-batches (the tool's -mb)")
      ->needs(sapp);
  plan_cmd->add_option("--mem,--memory-mb", plan.sapp_target.memory_mb, "With --sapp: device memory in MB (the tool's -mem)")
      ->needs(sapp);
  plan_cmd->add_option("-i,--interleave", plan.sapp_target.interleave, "With --sapp: chunks per rank (the tool's -i)")
      ->needs(sapp)
      ->capture_default_str();
  plan_cmd->add_option("--time-limit", plan.time_limit_s,
                       "Seconds the whole command may take (within 10 % or 0.2 s); when it stops the search early, the "
                       "best plan is returned with its gap. Ctrl-C stops it the same way (a second Ctrl-C ends it at once)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  AddProgressOption(*plan_cmd, plan.progress);
  plan_cmd->add_option("--solver", plan.solver,
                       "bnb: bmpipe's branch and bound (default); cbc: the time-indexed integer program solved by CBC; "
                       "brute-force: simulate every plan (tiny problems only)")
      ->check(CLI::IsMember({"bnb", "cbc", "brute-force"}))
      ->capture_default_str();
  plan_cmd->add_option("--node-limit", plan.node_limit, "Stop branch and bound after this many nodes (default: none)")
      ->check(CLI::NonNegativeNumber);
  plan_cmd->add_option("--lp-file", plan.lp_file, "With --solver cbc: write the integer program in LP format here");
  AddModelOptions(*plan_cmd, plan.model, problem_opt);

  plan_cmd->add_option("--target", plan.target, TargetHelp());
  plan_cmd->add_option("--export", plan.export_format,
                       "Also write the plan for a launcher: megatron, mindformers, deepspeed, torchtitan, csv (after the "
                       "report, or to --export-out)");
  plan_cmd->add_option("--export-out", plan.export_out, "Write the --export text to this file");
  AddSvgOptions(*plan_cmd, plan.svg, "Write the plan's timeline (ops per rank, memory over time) as SVG to this file");
  plan_cmd->add_option("--trace", plan.trace, "Write the simulated timeline as a Chrome trace (JSON: one process per rank with its ops and a memory counter) to this file, to open in Perfetto or chrome://tracing beside a real profile");

  ExportArgs exp;
  CLI::App* export_cmd = app.add_subcommand(
      "export",
      "Write a plan as configuration for the launcher that runs it: megatron (pipeline layout and flags; the "
      "closest global recomputation setting and the per-layer list), mindformers (offset and recompute lists), "
      "deepspeed (parts and checkpointing), torchtitan (module names per stage, schedule), csv (torch pipelining "
      "schedule: one row of <stage><F|B|I|W><micro-batch> actions per rank; I and W with a split backward).");
  export_cmd->add_option("--problem", exp.problem, "Problem file (JSON or YAML)")->required();
  export_cmd->add_option("--plan", exp.plan,
                         "Plan file: plan JSON or YAML, or a launcher configuration as simulate --plan reads it")
      ->required();
  export_cmd->add_option("--plan-format", exp.plan_format,
                         "The --plan file's format instead of detecting it: json, mindformers, megatron, deepspeed, "
                         "torchtitan or csv");
  export_cmd->add_option("--to", exp.to, "megatron, mindformers, deepspeed, torchtitan or csv")->required();
  export_cmd->add_option("--target", exp.target,
                         "The framework that runs it (default: the format's); megatron-local for Megatron's local spec");
  export_cmd->add_option("--out", exp.out, "Write to this file instead of standard output");

  CompareArgs cmp;
  CLI::App* compare = app.add_subcommand(
      "compare",
      "Plan the same problem with bmpipe and with every planner people use today (Megatron-LM's best flags, "
      "PipeDream, Merak, AdaPipe, Mist, the MindFormers pipeline-balance tool), judge every plan with the same "
      "simulator, and print one row per planner: iteration time, speed-up over Megatron's best, bubble breakdown, "
      "peak memory per rank, memory use, planning time. Without --problem or --model, compares on the built-in "
      "example.");
  CLI::Option* cmp_problem = compare->add_option("--problem", cmp.problem, "Problem file (JSON or YAML, docs/file-formats.md)");
  compare->add_option("--time-limit", cmp.time_limit_s,
                      "Seconds for bmpipe's search, and for each baseline that runs CBC (the MindFormers tool at most 90). "
                      "Ctrl-C stops each planner still to run at once (a baseline inside CBC at its own limit); a "
                      "second Ctrl-C ends the command")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  AddProgressOption(*compare, cmp.progress);
  compare->add_flag("--json", cmp.json, "Print the rows as JSON (each with its plan) instead of the table");
  compare->add_option("--target", cmp.target, TargetHelp());
  compare->add_option("--out", cmp.out, "Also write the JSON rows to this file");
  AddSvgOptions(*compare, cmp.svg, "Write bmpipe's and Megatron's timelines, on one time scale, as SVG to this file");
  compare->add_option("--baselines", cmp.baselines,
                      "Comma-separated planners to compare with (default all): megatron, pipedream, merak, adapipe, "
                      "mist, mindformers-tool")
      ->delimiter(',');
  AddModelOptions(*compare, cmp.model, cmp_problem);

  SearchArgs srch;
  srch.options.base.recompute = TrainingSetup{}.recompute;
  CLI::App* search = app.add_subcommand(
      "search",
      "Find the best way to train a model on N devices: every valid tensor-parallel (within a node) x "
      "context-parallel x pipeline x data-parallel split, expert and expert tensor parallelism (MoE models), virtual "
      "stages (interleaved 1F1B), micro-batch size, sequence parallelism, the ZeRO stage and, with --precision "
      "bf16,fp8, the GEMM precision. Cheap sound bounds (dominance, memory, a time lower bound) set aside what cannot be among the "
      "best; the rest is planned with the exact planner. Prints the top configurations with throughput, MFU, "
      "bubble and memory, why each other value of every dimension loses, then the best one's plan and its export. The result is the same for any --threads.");
  search->add_option("--model", srch.model, "Model preset (" + Joined(ModelPresetNames()) + ") or a Hugging Face config.json")
      ->required();
  search->add_option("--device", srch.device,
                     "Device preset (" + Joined(DevicePresetNames()) + ") or a device file (docs/cost-model.md)")
      ->required();
  search->add_option("--devices", srch.options.devices, "Number of devices to train on")->required();
  search->add_option("--gbs", srch.options.base.global_batch_size, "Global batch size (sequences per iteration)")
      ->required();
  search->add_option("--seq", srch.options.base.seq, "Sequence length (tokens)")->required();
  search->add_option("--top", srch.options.top, "Configurations to rank")->capture_default_str();
  search->add_option("--time-budget", srch.options.time_budget_s,
                     "Seconds after which no further configuration is planned (default: none). A search stopped by "
                     "its budget says so, and its ranking then depends on the machine's speed")
      ->check(CLI::NonNegativeNumber);
  search->add_option("--threads", srch.options.threads, "Planner threads (default: every hardware thread)")
      ->check(CLI::NonNegativeNumber);
  search->add_option("--plan-count", srch.options.plan_count,
                     "Configurations planned with the exact planner after screening, most promising first (-1: every "
                     "one the bounds do not rule out)")
      ->capture_default_str();
  search->add_option("--node-limit", srch.options.node_limit,
                     "Branch-and-bound nodes per configuration, after its first plans (-1: until proven optimal)")
      ->capture_default_str();
  search->add_flag("--exhaustive", srch.options.exhaustive,
                   "Plan every valid configuration without pruning (slow; to check the pruned search)");
  search->add_option("--tp", srch.options.tp, "Only these tensor-parallel sizes (comma-separated)")->delimiter(',');
  search->add_option("--pp", srch.options.pp, "Only these pipeline sizes")->delimiter(',');
  search->add_option("--vpp", srch.options.vpp, "Only these virtual-stage counts (1: plain 1F1B)")->delimiter(',');
  search->add_option("--mbs", srch.options.mbs, "Only these micro-batch sizes")->delimiter(',');
  search->add_flag("--flash-attn", srch.options.base.flash_attention, "Fused (flash) attention: no s x s activations");
  search->add_option("--recompute", srch.options.base.recompute,
                     "Recomputation options offered for every decoder layer (comma-separated): " +
                         Joined(RecomputeOptionNames()) +
                         ", or unions such as selective+norm; by default also those the target's settings use")
      ->delimiter(',')
      ->capture_default_str()
      ->each([&srch](const std::string&) { srch.recompute_given = true; });
  search->add_option("--reserved-gb", srch.reserved_gb,
                     "Memory reserved on every device for the framework, in GB (default: 1 GiB + 5 % of the device "
                     "memory)")
      ->check(CLI::NonNegativeNumber);
  search->add_option("--dp-overlap", srch.options.base.dp_overlap,
                     "Fraction of the data-parallel gradient sync hidden behind the backward (0..1)")
      ->capture_default_str();
  search->add_option("--cp", srch.options.cp,
                     std::string("Only these context-parallel sizes (default: 1, and with --flash-attn every size "
                                 "leaving each rank at least ") +
                         std::to_string(kMinContextTokens) + " tokens). " + kCpHelp)
      ->delimiter(',');
  search->add_option("--ep", srch.options.ep,
                     std::string("Only these expert-parallel sizes (default: every size dividing the experts and the "
                                 "devices of a stage). ") +
                         kEpHelp)
      ->delimiter(',');
  search->add_option("--etp", srch.options.etp,
                     "Only these expert tensor-parallel sizes (default: 1 and the configuration's tp)")
      ->delimiter(',');
  search->add_option("--zero", srch.options.zero,
                     std::string("Only these ZeRO stages (default: 1, 2 and 3, or 0 without data or context parallelism: ZeRO-1 is "
                                 "no costlier than 0 in any term). ") +
                         kZeroHelp)
      ->delimiter(',')
      ->check(CLI::Range(0, 3));
  search->add_option("--mfu-attention", srch.mfu_attention,
                     "How MFU counts attention: causal (the default: half the score square, as the fused kernel runs "
                     "it) or full (the whole square, as older papers state MFU)")
      ->check(CLI::IsMember({"causal", "full"}))
      ->capture_default_str();
  search->add_option("--precision", srch.precisions,
                     "GEMM precisions to try (comma-separated; default bf16): bf16, fp8 (Transformer Engine; 2 more "
                     "bytes per parameter for its weight caches)")
      ->delimiter(',')
      ->check(CLI::IsMember({"bf16", "fp8"}));
  {
    // Every schedule but GPipe; 1f1b stands for interleaved 1F1B where --vpp > 1.
    std::vector<std::string> names;
    std::string help = "Schedules to try (comma-separated; default 1f1b, interleaved where --vpp > 1):";
    for (const ScheduleTraits& t : kSchedules) {
      if (t.kind == ScheduleKind::kGPipe || t.kind == ScheduleKind::kInterleavedOneFOneB) continue;
      names.emplace_back(t.name);
      const std::string chunks = t.kind == ScheduleKind::kOneFOneB ? "any chunks per rank"
                                 : t.max_chunks == 1              ? "one chunk per rank"
                                 : t.min_chunks == t.max_chunks   ? fmt::format("{} chunks per rank", t.min_chunks)
                                                                  : fmt::format("{} or more chunks per rank", t.min_chunks);
      help += fmt::format(" {} ({}{}),", t.name, t.split_backward ? "split backward, " : "", chunks);
    }
    help += " each at the --vpp values it runs; the report's \"sched\" line says how the winner compares with the "
            "best 1F1B or interleaved plan";
    search->add_option("--schedules", srch.schedules, help)->delimiter(',')->check(CLI::IsMember(names));
  }
  AddSetupOptions(*search, srch.options.base, srch.words, [](CLI::Option* o) { return o; });
  search->add_flag("--json", srch.json, "Print the search as JSON (statistics, ranking, every configuration's verdict)");
  search->add_option("--out", srch.out, "Also write the search JSON to this file");
  search->add_option("--plan-out", srch.plan_out, "Write the best configuration's plan JSON (docs/file-formats.md) here");
  search->add_option("--export", srch.export_format,
                     "Export of the best plan printed after the report: megatron, mindformers, deepspeed, torchtitan, "
                     "csv, or none; when given, the default --target is its framework")
      ->capture_default_str()
      ->each([&srch](const std::string&) { srch.export_given = true; });
  search->add_option("--target", srch.target, TargetHelp());
  search->add_option("--export-out", srch.export_out, "Write the export to this file instead");
  AddSvgOptions(*search, srch.svg, "Write the best plan's timeline as SVG to this file");
  search->add_flag("-q,--quiet", srch.quiet, "No progress on standard error (as --progress none)");
  AddProgressOption(*search, srch.progress);

  ProfileArgs prof;
  CLI::App* profile = app.add_subcommand(
      "profile",
      "Build a problem from PyTorch profiler traces (Chrome/Kineto JSON, torch.profiler's export_chrome_trace) of a few "
      "training steps, one trace per recomputation option, run with profile_memory=True and the layers annotated by "
      "bmpipe.torch.annotate: each layer's forward, backward and recomputation time (the accelerator's kernels where "
      "the trace has them) and the memory its forward leaves allocated, medians over the micro-batches traced "
      "(docs/python.md, \"From a trace\"). Prints the problem JSON, or writes it to --out.");
  profile->add_option("--trace", prof.traces, "OPTION=FILE: the option every traced layer ran (none, full, selective, ...) "
                                              "and its trace; once per option")
      ->required();
  profile->add_option("--ranks", prof.pipeline.ranks, "Pipeline ranks to plan for")->required();
  profile->add_option("--micro-batches", prof.pipeline.micro_batches, "Micro-batches per iteration")->required();
  profile->add_option("--chunks", prof.pipeline.chunks, "Model chunks per rank (interleaved 1F1B when more than 1)")
      ->capture_default_str();
  profile->add_option("--schedule", prof.schedule, "Pipeline schedule (docs/semantics.md)")->capture_default_str();
  profile->add_option("--memory-gb", prof.memory_gb, "Device memory in GB")->required();
  profile->add_option("--reserved-gb", prof.reserved_gb, "Memory reserved on every device (framework, workspace), GB")
      ->capture_default_str();
  profile->add_option("--p2p-ms", prof.p2p_ms, "Time to send one layer's output to the next rank, ms")->capture_default_str();
  profile->add_option("--optimizer-bytes-per-param", prof.optimizer_bytes,
                      "Optimizer state per parameter beside weights and gradients (12 for Adam with fp32 master weights "
                      "and moments; 0 for SGD)")
      ->capture_default_str();
  profile->add_option("--out", prof.out, "Write the problem here instead of printing it");

  CalibrateArgs cal;
  CLI::App* calibrate = app.add_subcommand(
      "calibrate",
      "Fit a device preset's efficiencies to your own measured runs, and write a device file with them: the runs "
      "(iteration time, TFLOP/s or MFU, peak memory, layer times) in the format of the built-in table of published "
      "runs (data/published-runs.yaml; the `calibration` section is not needed), all on one device preset. Each "
      "run's time is predicted with Megatron's plan for its configuration; one or two efficiencies are fitted by a "
      "joint grid search (docs/fidelity.md, \"Calibration\"). Prints each measurement against the prediction before "
      "and after.");
  calibrate->add_option("--runs", cal.runs, "The measured runs (JSON or YAML)")->required();
  calibrate->add_option("--fit", cal.fit, "The efficiencies to fit, one or two: gemm, attention, memory, link, fp8_gemm, "
                                          "or a host wait (moe_host_ms, fp8_host_ms, ...)")
      ->delimiter(',')
      ->required();
  calibrate->add_option("--device-out", cal.device_out, "Write the device file (YAML) here instead of printing it");
  calibrate->add_flag("--json", cal.json, "Print JSON: the fitted values and every measurement before and after");
  calibrate->add_option("--out", cal.out, "Also write the JSON to this file");

  // The MindFormers tool spells two of its options with one dash: accept them as it does.
  std::vector<std::string> words(argv, argv + argc);
  for (std::string& w : words) {
    if (w == "-mb") w = "--mb";
    if (w == "-mem") w = "--mem";
  }
  std::vector<char*> word_ptrs;
  for (std::string& w : words) word_ptrs.push_back(w.data());
  try {
    app.parse(static_cast<int>(word_ptrs.size()), word_ptrs.data());
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? kExitOk : kExitBadInput;
  }
  if (simulate->parsed()) return RunSimulate(sim);
  if (validate->parsed()) return RunValidate(validate_table, validate_json, validate_markdown, validate_out);
  if (calibrate->parsed()) return RunCalibrate(cal);
  if (profile->parsed()) return RunProfile(prof);
  if (plan_cmd->parsed()) return RunPlan(plan);
  if (compare->parsed()) return RunCompare(cmp);
  if (export_cmd->parsed()) return RunExport(exp);
  if (search->parsed()) return RunSearch(srch);
  return kExitBadInput;
}

}  // namespace
}  // namespace bmpipe

// No exception leaves main unmapped: running out of memory is a size the user can lower, anything
// else is a bug to report.
int main(int argc, char** argv) {
  try {
    return bmpipe::Main(argc, argv);
  } catch (const std::bad_alloc&) {
    return bmpipe::Fail(bmpipe::TooLarge(
        "out of memory: the problem is too large to plan in the memory available; fewer layers (merge identical "
        "ones with 'repeat'), stages, micro-batches or recomputation options would help"));
  } catch (const std::exception& e) {
    return bmpipe::Fail(bmpipe::InternalError(std::string("unexpected exception: ") + e.what()));
  } catch (...) {
    return bmpipe::Fail(bmpipe::InternalError("unexpected exception of unknown type"));
  }
}

// bmpipe plan: the best plan of a problem for a target, proven optimal or with its gap.
#include <optional>

#include <fmt/format.h>

#include "bmpipe/app/commands.h"
#include "bmpipe/app/common.h"
#include "bmpipe/app/invocation.h"
#include "bmpipe/app/model.h"
#include "bmpipe/core/text.h"
#include "bmpipe/frameworks/formats.h"
#include "bmpipe/io/plan_json.h"
#include "bmpipe/problem/sapp_reader.h"
#include "bmpipe/report/chrome_trace.h"
#include "bmpipe/sim/simulator.h"
#include "bmpipe/solve/diagnose.h"

namespace bmpipe::app {
namespace {

struct PlanRequest {
  std::string problem;
  const Problem* given = nullptr;  // Python's problem
  std::string target;
  ModelRequest model;
  std::string sapp;  // the MindFormers pipeline-balance tool's init YAML or layer JSON
  SappTarget sapp_target;
  std::string export_format;
  std::string export_out;
  SvgRequest svg;
  std::string trace;
  std::string out;
  bool json = false;
  double time_limit_s = 60;
  std::string solver = "bnb";
  long node_limit = -1;
  std::string lp_file;
  std::string progress = "auto";
};

OptionTable PlanOptions(PlanRequest& r) {
  OptionTable t;
  t.Add("--problem", "", &r.problem, "Problem file (JSON or YAML, docs/file-formats.md)");
  t.Add("--out", "", &r.out, "Also write the plan JSON (docs/file-formats.md, with metrics) to this file");
  t.Add("--json", "", &r.json, "Print the plan JSON instead of the report");
  t.Add("--sapp", "", &r.sapp,
        "Plan from the MindFormers pipeline-balance tool's input: its init YAML (dry-run memory, decomposed as the tool "
        "does; time_config) or its layer JSON; with -s, -mb, -mem (and -i) as that tool takes them. Prints the "
        "MindFormers lists to paste into the configuration.")
      .Excludes("--problem");
  t.Add("-s,--stages", "", &r.sapp_target.stages, "With --sapp: pipeline stages (the tool's -s)").Needs("--sapp");
  t.Add("--mb,--micro-batches", "", &r.sapp_target.micro_batches, "With --sapp: micro-batches (the tool's -mb)")
      .Needs("--sapp");
  t.Add("--mem,--memory-mb", "", &r.sapp_target.memory_mb, "With --sapp: device memory in MB (the tool's -mem)")
      .Needs("--sapp");
  t.Add("-i,--interleave", "", &r.sapp_target.interleave, "With --sapp: chunks per rank (the tool's -i)")
      .Needs("--sapp")
      .ShowDefault();
  t.Add("--time-limit", "time_limit", &r.time_limit_s,
        "Seconds the whole command may take (within 10 % or 0.2 s); when it stops the search early, the best plan is "
        "returned with its gap. Ctrl-C stops it the same way (a second Ctrl-C ends it at once)")
      .Positive()
      .ShowDefault();
  AddProgressOption(t, r.progress);
  t.Add("--solver", "solver", &r.solver,
        "bnb: bmpipe's branch and bound (default); cbc: the time-indexed integer program solved by CBC; brute-force: "
        "simulate every plan (tiny problems only)")
      .Choices({"bnb", "cbc", "brute-force"})
      .ShowDefault();
  t.Add("--node-limit", "node_limit", &r.node_limit, "Stop branch and bound after this many nodes (default: none)")
      .NonNegative();
  t.Add("--lp-file", "", &r.lp_file, "With --solver cbc: write the integer program in LP format here");
  r.model.default_headroom = true;
  AddModelOptions(t, r.model, "--problem");
  t.Add("--target", "target", &r.target, TargetOptionHelp());
  t.Add("--export", "", &r.export_format,
        "Also write the plan for a launcher: " + fmt::format("{}", fmt::join(FormatNames(), ", ")) +
            " (after the report, or to --export-out)");
  t.Add("--export-out", "", &r.export_out, "Write the --export text to this file");
  AddSvgOptions(t, r.svg, "Write the plan's timeline (ops per rank, memory over time) as SVG to this file");
  t.Add("--trace", "", &r.trace, kTraceHelp);
  return t;
}

// No plan that fits: what the command line prints, the diagnosis first.
Output NoFit(const PlanRequest& r, const Problem& pb, const ChosenTarget& chosen, const TargetPlan& planned,
             const std::optional<TargetPlan>& any, const Lines& origin) {
  Output o;
  o.exit = Exit::kNoFit;
  for (const auto& [label, value] : TargetLines(chosen, planned, any)) o.messages.push_back(label + ": " + value);
  const bool any_fits =
      any && (any->planner.status == ModelStatus::kOptimal || any->planner.status == ModelStatus::kFeasible);
  if (any_fits) {
    // The problem fits; the target's settings do not.
    o.messages.push_back(fmt::format("no plan {} runs unmodified fits in memory: its recomputation settings save too "
                                     "little here; another --target, or the problem's options (a 'full' option for "
                                     "Megatron's full recomputation) would help",
                                     TargetOf(chosen.kind).name));
    return o;
  }
  o.messages.push_back(DescribeShortfall(pb, DiagnoseMemory(pb)));
  if (!r.model.model.empty()) {
    const TrainingSetup& s = r.model.setup;
    o.messages.push_back(fmt::format(
        "in the setup's terms: more pipeline stages (--pp) or tensor parallelism (--tp){}{}{}, or a smaller --mbs",
        ZeroStage(s) < 1 ? ", --distributed-optimizer" : (ZeroStage(s) < 3 ? ", a higher --zero" : ""),
        s.sequence_parallel || s.tp == 1 ? "" : ", --sequence-parallel", s.flash_attention ? "" : ", --flash-attn"));
  }
  for (const auto& [label, value] : origin) {
    if (label == "not modeled") o.messages.push_back("note: not modeled: " + value);
  }
  return o;
}

// The plan of `r` within `command`'s time; `notes` follow the report's lines on the problem.
Result<Output> PlanOnce(const PlanRequest& r, const Context& context, const Deadline& command, const Lines& notes) {
  std::string shown;
  Lines origin;
  if (!r.sapp.empty() && (r.sapp_target.stages < 1 || r.sapp_target.micro_batches < 1 || r.sapp_target.memory_mb <= 0)) {
    return InvalidInput("--sapp needs the pipeline to plan: -s STAGES -mb MICRO_BATCHES -mem MEMORY_MB (as the "
                        "MindFormers tool takes them), e.g. -s 16 -mb 16 -mem 56000");
  }
  // A user of the MindFormers tool gets the lists to paste into the MindFormers configuration.
  const std::string export_format = r.export_format.empty() && !r.sapp.empty() ? "mindformers" : r.export_format;
  std::optional<FrameworkId> format;
  if (!export_format.empty()) {
    Result<FrameworkId> parsed = ParseFormat(export_format);
    if (!parsed.ok()) return parsed.error();
    format = parsed.value();
  }
  if (!r.lp_file.empty() && r.solver != "cbc") {
    return InvalidInput("--lp-file writes the integer program CBC solves; add --solver cbc");
  }
  Result<ChosenTarget> chosen = ChooseTarget(r.target, format);
  if (!chosen.ok()) return chosen.error();
  Files files;
  Result<Problem> problem = r.given                ? Result<Problem>(*r.given)
                            : !r.sapp.empty()      ? LoadSappProblem(r.sapp, r.sapp_target)
                            : r.model.model.empty() ? LoadProblemOrExample(r.problem, context, shown)
                                                    : BuildModelProblem(r.model, origin, files, {chosen.value().kind});
  if (!problem.ok()) return problem.error();
  const Problem& pb = problem.value();
  if (Status runs = TargetRunsProblemSetup(chosen.value().kind, pb); !runs.ok()) return runs.error();
  if (Status size = CheckSvg(r.svg, pb, 1); !size.ok()) return size.error();
  if (Status size = CheckTraceSize(pb); !r.trace.empty() && !size.ok()) return size.error();
  if (!r.sapp.empty()) {
    origin.push_back({"problem", "the MindFormers pipeline-balance tool's input " + r.sapp});
    origin.push_back({"memory", fmt::format("stage constant {} on every rank (counted once; the tool adds it again on "
                                            "the first and last stage)",
                                            FormatBytes(pb.reserved_bytes))});
  }
  if (r.model.model.empty() && r.sapp.empty()) {
    origin.push_back({"problem", shown + (pb.name.empty() ? "" : " (" + pb.name + ")")});
  }
  origin.insert(origin.end(), notes.begin(), notes.end());
  PlannerOptions options;
  options.kind = r.solver == "cbc"           ? PlannerKind::kCbc
                 : r.solver == "brute-force" ? PlannerKind::kBruteForce
                                             : PlannerKind::kBranchAndBound;
  options.time_limit_name = fmt::format("time limit {:g} s", r.time_limit_s);
  options.deadline = context.stop;
  options.node_limit = r.node_limit;
  options.write_lp = !r.lp_file.empty();
  const ProgressSink progress = context.Progress("plan", r.progress);
  options.progress = progress;
  // With a framework target, its plan gets three quarters of the time and the per-layer plan it
  // is compared with the rest.
  const bool also_any = chosen.value().kind != TargetKind::kAny;
  options.time_limit_s = command.SecondsLeft() * (also_any ? 0.75 : 1.0);
  Result<TargetPlan> planned = PlanForTarget(pb, chosen.value().kind, options);
  if (!planned.ok()) return planned.error();
  std::optional<TargetPlan> any;
  if (also_any) {
    options.time_limit_s = command.SecondsLeft();
    if (progress) {
      options.progress = [progress](const Progress& p) {
        Progress q = p;
        q.phase = "the per-layer plan to compare with: " + p.phase;
        progress(q);
      };
    }
    // The target's plan is one of its points: the per-layer plan starts from it, never slower.
    const PlannerResult& target_plan = planned.value().planner;
    if (target_plan.status == ModelStatus::kOptimal || target_plan.status == ModelStatus::kFeasible) {
      options.seeds = {target_plan.plan};
    }
    Result<TargetPlan> unrestricted = PlanForTarget(pb, TargetKind::kAny, options);
    if (!unrestricted.ok()) return unrestricted.error();
    any = unrestricted.value();
  }
  planned.value().planner.stopped_by = StoppedBy(planned.value().planner.stopped_by, options.time_limit_name, context);
  const PlannerResult& result = planned.value().planner;
  if (result.status == ModelStatus::kInfeasible) return NoFit(r, pb, chosen.value(), planned.value(), any, origin);
  if (result.status == ModelStatus::kNoSolution) {
    Output o;
    o.exit = Exit::kNoPlan;
    o.messages.push_back("no plan found: the search was stopped by " + result.stopped_by +
                         " before it found a plan that fits" + (context.Interrupted() ? "" : "; raise --time-limit"));
    return o;
  }
  Result<SimResult> simulated = SimulatePlan(pb, result.plan);
  if (!simulated.ok()) return simulated.error();
  const SimResult& sim = simulated.value();
  ReportHeader header{"bmpipe plan", origin};
  for (auto& line : TargetLines(chosen.value(), planned.value(), any)) header.lines.push_back(line);
  for (auto& line : PlannerLines(result)) header.lines.push_back(line);
  const std::string title = "bmpipe plan: " + (pb.name.empty() ? shown : pb.name);
  if (!r.svg.path.empty()) {
    const std::string label =
        "bmpipe (" + std::string(result.status == ModelStatus::kOptimal ? "proven optimal" : "best found") + ")";
    if (Status written = StageSvg(files, r.svg, pb, title, {{label, result.plan}}); !written.ok()) return written.error();
    header.lines.push_back({"timeline", "written to " + r.svg.path});
  }
  if (!r.trace.empty()) {
    if (Status written = StageTrace(files, r.trace, pb, result.plan, title, header); !written.ok()) return written.error();
  }
  std::string exported;
  if (format) {
    Result<std::string> text = ExportPlan(pb, result.plan, *format, chosen.value().kind);
    if (!text.ok()) return text.error();
    exported = text.value();
    if (!r.export_out.empty()) {
      files.push_back({r.export_out, exported});
      header.lines.push_back({"export", export_format + " written to " + r.export_out});
      exported.clear();
      Status companions = StageExportCompanions(files, header.lines, pb, result.plan, *format, r.export_out);
      if (!companions.ok()) return companions.error();
    }
  }
  if (!r.lp_file.empty()) {
    files.push_back({r.lp_file, result.lp_text});
    header.lines.push_back({"integer program", "written to " + r.lp_file});
  }
  std::string report = FormatReport(header, pb, result.plan, sim);
  Output o = Emit(std::move(files), r.out, r.json, PlanJsonText(pb, result.plan, sim, SolverInfoOf(result)), report);
  if (!exported.empty()) o.out += "\n" + exported;
  o.extras.push_back({"report", std::move(report)});
  return o;
}

Result<Output> RunPlan(const PlanRequest& r, const Context& context) {
  // --time-limit bounds the whole command, from here.
  const Deadline command = Deadline::In(r.time_limit_s);
  Result<Output> planned = PlanOnce(r, context, command, {});
  const bool default_headroom = !r.given && r.sapp.empty() && !r.model.model.empty() && r.model.words.headroom_gb < 0;
  if (!planned.ok() || planned.value().exit != Exit::kNoFit || !default_headroom || context.Interrupted()) {
    return planned;
  }
  // No plan keeps the default headroom free: the best that fits at all, with the report's warning.
  PlanRequest full = r;
  full.model.words.headroom_gb = 0;
  return PlanOnce(full, context, command,
                  {{"headroom", "none: no plan keeps the default headroom (the cost model's held-out memory error) "
                                "free, so this plan uses the full capacity; see Memory below"}});
}

}  // namespace

Command PlanCommand() {
  return MakeCommand<PlanRequest, PlanOptions, RunPlan>(
      "plan",
      "Choose the stage partition and each layer's recomputation option that minimize the simulated iteration time "
      "with every rank within memory, prove it optimal (or report the gap), and print the plan. The problem comes "
      "from --problem FILE, from --model/--device and a training setup (the analytic cost model), or from --sapp "
      "(the MindFormers pipeline-balance tool's input); with none of them, the built-in example (that tool's demo).");
}

}  // namespace bmpipe::app

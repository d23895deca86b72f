// bmpipe simulate: a plan (a plan file, a launcher's configuration, or a strategy's) simulated on
// a problem, with the report per stage and per rank.
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "bmpipe/app/commands.h"
#include "bmpipe/app/common.h"
#include "bmpipe/app/invocation.h"
#include "bmpipe/app/model.h"
#include "bmpipe/core/text.h"
#include "bmpipe/frameworks/formats.h"
#include "bmpipe/frameworks/megatron/megatron.h"
#include "bmpipe/io/plan_json.h"
#include "bmpipe/problem/recompute.h"
#include "bmpipe/report/chrome_trace.h"
#include "bmpipe/sim/simulator.h"

namespace bmpipe::app {
namespace {

struct SimulateRequest {
  std::string problem;
  const Problem* given = nullptr;  // Python's problem
  ModelRequest model;
  std::string plan;
  std::string plan_text;    // Python: the plan's text instead of a file
  std::string plan_source = "plan";  // Python: what the text is, for messages
  std::string plan_format;  // empty: detected from the content
  std::string strategy;     // even or megatron; default: megatron with --model, else even
  bool json = false;
  std::string out;
  SvgRequest svg;
  std::string trace;
  int recompute_layers = 0;  // --recompute-num-layers: full recomputation by Megatron's block method
};

OptionTable SimulateOptions(SimulateRequest& r) {
  OptionTable t;
  t.Add("--problem", "", &r.problem, "Problem file (JSON or YAML, docs/file-formats.md)");
  t.Add("--plan", "", &r.plan,
        "Plan file: plan JSON or YAML (docs/file-formats.md), or a launcher configuration (a MindFormers YAML, "
        "Megatron-LM arguments, the DeepSpeed module or torchtitan arguments bmpipe exports), detected from the "
        "content");
  t.Add("", "plan", &r.plan_text, "The plan: the text of a plan file or of a launcher's configuration");
  t.Add("", "plan_source", &r.plan_source, "What the plan's text is (a path, say), for messages");
  t.Add("--plan-format", "plan_format", &r.plan_format,
        "The --plan file's format instead of detecting it: " + WordsOr(PlanFormatNames()) +
            " (a schedule CSV is refused: it fixes no stages)");
  t.Add("--strategy", "strategy", &r.strategy,
        "The plan when no --plan is given. megatron: Megatron-LM's split for the configuration (equal decoder layers "
        "per stage, else the embedding and/or loss counted as a layer, else uneven first and last stages) with one "
        "global --recompute setting; the default with --model. even: layers split evenly, first option of every "
        "layer; the default with --problem")
      .Choices({"even", "megatron"});
  t.Add("--json", "", &r.json, "Print the plan JSON with the simulated metrics instead of the report");
  t.Add("--out", "", &r.out, "Also write the plan JSON with the simulated metrics to this file");
  AddSvgOptions(t, r.svg, "Write the timeline (ops per rank, memory over time) as SVG to this file");
  t.Add("--trace", "", &r.trace, kTraceHelp);
  r.model.setup.recompute = {"none"};
  AddModelOptions(t, r.model, "--problem");
  t.Find("--recompute")
      ->Help("Megatron's recomputation setting for every decoder layer: none, selective, full, or the modules of "
             "--recompute-granularity selective --recompute-modules as bmpipe names them, joined by '+' (e.g. "
             "mla_up_proj, norm+mlp_act; Megatron's core_attn, layernorm, moe_act and moe are read as selective, norm, "
             "mlp_act and mlp)");
  t.RecordGiven(&r.model.given);
  t.Add("--recompute-num-layers", "recompute_num_layers", &r.recompute_layers,
        "With --recompute full: Megatron's --recompute-method block --recompute-num-layers N, full recomputation of "
        "the first N decoder layers of every stage (chunk), the others none; without it every layer (method uniform, "
        "--recompute-num-layers 1)")
      .Group("Cost model (instead of --problem)")
      .Needs("--model")
      .Positive();
  t.RecordGiven(nullptr);
  return t;
}

Result<Output> RunSimulate(const SimulateRequest& r, const Context& context) {
  Lines origin;
  if (r.problem.empty() && r.model.model.empty() && !r.given) {
    return InvalidInput("simulate needs --problem FILE, or --model with --device and a training setup");
  }
  const bool model = !r.model.model.empty();
  const std::string strategy = !r.strategy.empty() ? r.strategy : model ? "megatron" : "even";
  GlobalRecompute recompute = GlobalRecompute::kNone;
  ModelRequest given = r.model;
  given.file_recompute_only = true;  // the file's recomputation is the setting simulated
  if (r.recompute_layers > 0) given.recompute_layers = r.recompute_layers;
  Result<ModelRequest> resolved = model ? ResolveSetup(given, origin) : Result<ModelRequest>(given);
  if (!resolved.ok()) return resolved.error();
  ModelRequest request = resolved.value();
  if (model || strategy == "megatron") {
    // One setting on every decoder layer, as Megatron applies it: a global one, or a set of modules
    // (the problem then offers that option alone, which the plan's layers take).
    std::vector<std::string> names = request.setup.recompute;
    if (request.recompute_layers > 0 && names == std::vector<std::string>{"none", "full"}) names = {"full"};
    const std::optional<GlobalRecompute> global = names.size() == 1 ? ParseGlobalRecompute(names.front()) : std::nullopt;
    // A file's modules for some layers only (Megatron's mlp on the dense ones, moe on the MoE ones)
    // offer the options its plan sets layer by layer.
    const bool per_layer = names.size() == 2 && request.from_file.count("recompute") && request.recompute_layers == 0;
    if (!global && !per_layer) {
      const Result<Recompute> parts = names.size() == 1 ? ParseRecompute(names.front()) : InvalidInput("");
      if (!parts.ok() || (parts.value().parts & kOffloadActivations)) {
        return InvalidInput(fmt::format(
            "--recompute {}: simulate applies one setting on every decoder layer, as Megatron does; use none, "
            "selective, full or one set of modules joined by '+' (e.g. mla_up_proj, norm+mlp_act){}",
            fmt::join(names, ","), parts.ok() || names.size() != 1 ? "" : "; " + parts.error().message));
      }
    }
    recompute = global.value_or(GlobalRecompute::kNone);
    if (request.recompute_layers > 0) {
      if (recompute != GlobalRecompute::kFull) {
        return InvalidInput(fmt::format("--recompute-num-layers {} needs --recompute full (Megatron's block method "
                                        "applies to full recomputation only)",
                                        request.recompute_layers));
      }
      request.setup.recompute = {"none", "full"};  // the block's layers full, the others none
    }
  }
  Files files;
  Result<Problem> problem = r.given   ? Result<Problem>(*r.given)
                            : !model ? LoadProblemFile(r.problem, context)
                                     : BuildModelProblem(request, origin, files, {});
  if (!problem.ok()) return problem.error();
  const Problem& pb = problem.value();
  if (origin.empty()) origin.push_back({"problem", r.problem + (pb.name.empty() ? "" : " (" + pb.name + ")")});
  if (Status size = CheckSvg(r.svg, pb, 1); !size.ok()) return size.error();
  if (Status size = CheckTraceSize(pb); !r.trace.empty() && !size.ok()) return size.error();

  Plan plan;
  SolverInfo solver{"none", ModelStatus::kFeasible, 0.0};
  std::string plan_origin;
  const bool plan_given = !r.plan.empty() || !r.plan_text.empty();
  if (plan_given && !r.strategy.empty()) return InvalidInput("give --plan or --strategy, not both");
  std::optional<PlanFormat> format;
  if (!r.plan_format.empty()) {
    if (!plan_given) return InvalidInput("--plan-format " + r.plan_format + " needs --plan FILE");
    Result<PlanFormat> parsed = ParsePlanFormat(r.plan_format);
    if (!parsed.ok()) return parsed.error();
    format = parsed.value();
  }
  std::vector<std::string> notes;
  // --setup-from's file without --plan or --strategy: the run it launches, its layout and each
  // layer's recomputation as Megatron applies them (Megatron's default split when the file's plan
  // is not this problem's, say with an option given over the file).
  std::optional<Plan> file_plan;
  if (!plan_given && r.strategy.empty() && !request.setup_plan.empty()) {
    std::vector<std::string> ignored;
    Result<Plan> read = ReadLauncherPlan(request.setup_plan, PlanFormat{request.setup_plan_format}, pb,
                                         request.setup_source, &ignored);
    const std::string_view framework = request.setup_plan_format == FrameworkId::kTorchTitan ? "torchtitan"
                                                                                             : "Megatron-LM";
    if (read.ok()) {
      file_plan = read.value();
      plan_origin = fmt::format("{}: its layout and recomputation, as {} runs them", request.setup_source, framework);
    } else {
      notes.push_back("the --setup-from file's own plan is not this problem's (" + read.error().message +
                      "): Megatron-LM's default split instead");
    }
  }
  if (file_plan) {
    plan = *file_plan;
  } else if (!plan_given && strategy == "megatron") {
    Result<MegatronLaunch> launch = MegatronDefaultPlan(pb, recompute, request.recompute_layers);
    if (!launch.ok()) return launch.error();
    plan = launch.value().plan;
    plan_origin = "Megatron-LM: " + launch.value().flags;
  } else if (!plan_given) {
    plan = EvenPlan(pb);
    plan_origin = "even split, first option of every layer (no --plan given)";
  } else {
    Result<LoadedPlan> loaded = r.plan.empty() ? ReadAnyPlan(r.plan_text, format, pb, r.plan_source)
                                               : LoadAnyPlan(r.plan, format, pb);
    if (!loaded.ok()) return loaded.error();
    const LoadedPlan& doc = loaded.value();
    plan = doc.document.plan;
    if (doc.document.solver) solver = *doc.document.solver;
    plan_origin = r.plan.empty() ? r.plan_source : r.plan;
    if (doc.format != kPlanFile && doc.format != PlanFormat{FrameworkId::kMindFormers}) {
      plan_origin += " (" + PlanFormatName(doc.format) + " configuration)";
    }
    notes = doc.notes;
  }
  Result<SimResult> simulated = SimulatePlan(pb, plan);
  if (!simulated.ok()) return simulated.error();
  const SimResult& sim = simulated.value();
  if (!sim.fits) solver.status = ModelStatus::kInfeasible;

  ReportHeader header{"bmpipe simulate", origin};
  header.lines.push_back({"plan", plan_origin});
  for (const std::string& note : notes) header.lines.push_back({"note", note});
  const std::string title = "bmpipe simulate: " + (pb.name.empty() ? r.problem : pb.name);
  if (!r.svg.path.empty()) {
    if (Status written = StageSvg(files, r.svg, pb, title, {{plan_origin, plan}}); !written.ok()) return written.error();
    header.lines.push_back({"timeline", "written to " + r.svg.path});
  }
  if (!r.trace.empty()) {
    if (Status written = StageTrace(files, r.trace, pb, plan, title, header); !written.ok()) return written.error();
  }
  std::string report = FormatReport(header, pb, plan, sim);
  Output o = Emit(std::move(files), r.out, r.json, PlanJsonText(pb, plan, sim, solver), report);
  o.extras.push_back({"report", std::move(report)});
  for (const std::string& note : notes) o.extras.push_back({"note", note});
  if (!sim.fits) o.messages.push_back("warning: the plan exceeds device memory on at least one rank (see the report)");
  return o;
}

}  // namespace

Command SimulateCommand() {
  return MakeCommand<SimulateRequest, SimulateOptions, RunSimulate>(
      "simulate",
      "Simulate a plan on a problem (docs/semantics.md) and print a per-stage and per-rank report: iteration time, "
      "bubble breakdown, memory per rank over its capacity. The problem comes from --problem FILE, or from "
      "--model, --device and a training setup (the analytic cost model), where the plan is Megatron-LM's for that "
      "configuration unless --plan is given: the way to check a row of `bmpipe validate` by hand.");
}

}  // namespace bmpipe::app

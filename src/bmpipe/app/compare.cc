// bmpipe compare: bmpipe's plan against every baseline's, each judged by the same simulator.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "bmpipe/app/commands.h"
#include "bmpipe/core/document.h"
#include "bmpipe/app/common.h"
#include "bmpipe/app/invocation.h"
#include "bmpipe/app/model.h"
#include "bmpipe/baselines/compare.h"
#include "bmpipe/core/json_cursor.h"
#include "bmpipe/report/compare_report.h"

namespace bmpipe::app {
namespace {

struct CompareRequest {
  std::string problem;
  const Problem* given = nullptr;  // Python's problem
  std::string target;
  ModelRequest model;
  double time_limit_s = 60;
  bool json = false;
  std::string out;
  std::vector<std::string> baselines;
  SvgRequest svg;
  std::string progress = "auto";
};

std::vector<std::string> BaselineNames() {
  std::vector<std::string> names;
  for (BaselineKind kind : AllBaselines()) names.push_back(BaselineName(kind));
  return names;
}

OptionTable CompareTable(CompareRequest& r) {
  OptionTable t;
  t.Add("--problem", "", &r.problem, "Problem file (JSON or YAML, docs/file-formats.md)");
  t.Add("--time-limit", "time_limit", &r.time_limit_s,
        "Seconds for bmpipe's search, and for each baseline that runs CBC (the MindFormers tool at most 90). Ctrl-C "
        "stops each planner still to run at once (CBC too); a second Ctrl-C ends the "
        "command")
      .Positive()
      .ShowDefault();
  AddProgressOption(t, r.progress);
  t.Add("--json", "", &r.json, "Print the rows as JSON (each with its plan) instead of the table");
  t.Add("--target", "target", &r.target, TargetOptionHelp());
  t.Add("--out", "", &r.out, "Also write the JSON rows to this file");
  AddSvgOptions(t, r.svg, "Write bmpipe's and Megatron's timelines, on one time scale, as SVG to this file");
  t.Add("--baselines", "baselines", &r.baselines,
        "Comma-separated planners to compare with (default all): " + fmt::format("{}", fmt::join(BaselineNames(), ", ")))
      .CommaSeparated();
  AddModelOptions(t, r.model, "--problem");
  return t;
}

Result<Output> RunCompare(const CompareRequest& r, const Context& context) {
  std::string shown;
  Lines origin;
  Files files;
  Result<ChosenTarget> chosen = ChooseTarget(r.target, std::nullopt);
  if (!chosen.ok()) return chosen.error();
  const TargetKind megatron_spec =
      chosen.value().kind == TargetKind::kMegatronLocal ? TargetKind::kMegatronLocal : TargetKind::kMegatron;
  Result<Problem> problem = r.given                ? Result<Problem>(*r.given)
                            : r.model.model.empty() ? LoadProblemOrExample(r.problem, context, shown)
                                                    : BuildModelProblem(r.model, origin, files,
                                                                        {chosen.value().kind, megatron_spec});
  if (!problem.ok()) return problem.error();
  const Problem& pb = problem.value();
  if (Status runs = TargetRunsProblemSetup(chosen.value().kind, pb); !runs.ok()) return runs.error();
  if (origin.empty()) origin.push_back({"problem", shown + (pb.name.empty() ? "" : " (" + pb.name + ")")});
  if (Status size = CheckSvg(r.svg, pb, 2); !size.ok()) return size.error();
  bmpipe::CompareOptions options;
  options.time_limit_s = r.time_limit_s;
  options.target = chosen.value().kind;
  if (!r.baselines.empty()) {
    options.baselines.clear();
    const std::vector<std::string> names = BaselineNames();
    for (const std::string& name : r.baselines) {
      const auto at = std::find(names.begin(), names.end(), name);
      if (at == names.end()) {
        return InvalidInput(fmt::format("--baselines: unknown planner '{}'{}; planners: {}", name, DidYouMean(name, names),
                                        fmt::join(names, ", ")));
      }
      options.baselines.push_back(AllBaselines()[static_cast<std::size_t>(at - names.begin())]);
    }
  }
  options.progress = context.Progress("compare", r.progress);
  options.deadline = context.stop;
  Result<std::vector<CompareRow>> rows = Compare(pb, options);
  if (!rows.ok()) return rows.error();
  for (CompareRow& row : rows.value()) {
    row.note = StoppedBy(row.note, fmt::format("time limit {:g} s", r.time_limit_s), context);
  }
  if (!r.svg.path.empty()) {
    // bmpipe's plan above Megatron's best, on one time scale.
    std::vector<std::pair<std::string, Plan>> plans;
    for (const CompareRow& row : rows.value()) {
      if ((row.name == "bmpipe" || row.name == "megatron") && row.has_plan) plans.push_back({row.name + ": " + row.note, row.plan});
    }
    Status written = StageSvg(files, r.svg, pb, "bmpipe compare: " + (pb.name.empty() ? shown : pb.name), plans);
    if (!written.ok()) return written.error();
    origin.push_back({"timeline", "bmpipe and megatron written to " + r.svg.path});
  }
  const Target& target = TargetOf(options.target);
  origin.push_back({"target", fmt::format("{}: {} ({}); megatron is stock {} at its best layout and recomputation",
                                          target.name, target.framework, chosen.value().why,
                                          options.target == TargetKind::kMegatronLocal
                                              ? "Megatron-Core, local spec"
                                              : "Megatron-Core, Transformer Engine spec")});
  std::string title = "bmpipe compare";
  for (const auto& [label, value] : origin) title += fmt::format("\n  {:<10} {}", label, value);
  return Emit(std::move(files), r.out, r.json, DumpJson(CompareToJson(pb, rows.value()), 2) + "\n",
              FormatCompare(title, pb, rows.value()));
}

}  // namespace

Command CompareCommand() {
  return MakeCommand<CompareRequest, CompareTable, RunCompare>(
      "compare",
      "Plan the same problem with bmpipe and with every planner people use today (Megatron-LM's best flags, "
      "PipeDream, Merak, AdaPipe, Mist, the MindFormers pipeline-balance tool), judge every plan with the same "
      "simulator, and print one row per planner: iteration time, speed-up over Megatron's best, bubble breakdown, "
      "peak memory per rank, memory use, planning time. Without --problem or --model, compares on the built-in "
      "example.");
}

}  // namespace bmpipe::app

// bmpipe export: a plan written as the configuration of the launcher that runs it.
#include <optional>

#include <fmt/format.h>

#include "bmpipe/app/commands.h"
#include "bmpipe/app/common.h"
#include "bmpipe/app/invocation.h"
#include "bmpipe/app/model.h"
#include "bmpipe/core/text.h"
#include "bmpipe/frameworks/formats.h"

namespace bmpipe::app {
namespace {

struct ExportRequest {
  std::string problem;
  const Problem* given = nullptr;  // Python's problem
  std::string plan;
  std::string plan_text;    // Python: the plan's text instead of a file
  std::string plan_format;  // empty: detected from the content
  std::string to;
  std::string target;
  std::string out;
};

OptionTable ExportOptions(ExportRequest& r) {
  OptionTable t;
  t.Add("--problem", "", &r.problem, "Problem file (JSON or YAML)").Required();
  t.Add("--plan", "", &r.plan, "Plan file: plan JSON or YAML, or a launcher configuration as simulate --plan reads it")
      .Required();
  t.Add("", "plan", &r.plan_text, "The plan: the text of a plan file or of a launcher's configuration");
  t.Add("--plan-format", "plan_format", &r.plan_format,
        "The --plan file's format instead of detecting it: " + WordsOr(PlanFormatNames()));
  t.Add("--to", "to", &r.to, WordsOr(FormatNames())).Required();
  t.Add("--target", "target", &r.target,
        "The framework that runs it (default: the format's); megatron-local for Megatron's local spec");
  t.Add("--out", "", &r.out, "Write to this file instead of standard output");
  return t;
}

Result<Output> RunExport(const ExportRequest& r, const Context& context) {
  Result<Problem> problem = r.given ? Result<Problem>(*r.given) : LoadProblemFile(r.problem, context);
  if (!problem.ok()) return problem.error();
  std::optional<PlanFormat> plan_format;
  if (!r.plan_format.empty()) {
    Result<PlanFormat> parsed = ParsePlanFormat(r.plan_format);
    if (!parsed.ok()) return parsed.error();
    plan_format = parsed.value();
  }
  Result<LoadedPlan> plan = r.plan.empty() ? ReadAnyPlan(r.plan_text, plan_format, problem.value(), "plan")
                                           : LoadAnyPlan(r.plan, plan_format, problem.value());
  if (!plan.ok()) return plan.error();
  Result<FrameworkId> format = ParseFormat(r.to);
  if (!format.ok()) return format.error();
  Result<ChosenTarget> chosen = ChooseTarget(r.target, format.value());
  if (!chosen.ok()) return chosen.error();
  const Plan& p = plan.value().document.plan;
  Result<std::string> text = ExportPlan(problem.value(), p, format.value(), chosen.value().kind);
  if (!text.ok()) return text.error();
  Output o;
  if (!TargetRunsPlan(problem.value(), p, chosen.value().kind)) {
    o.messages.push_back(fmt::format("warning: {} cannot run this plan as planned (its recomputation is not one of the "
                                     "target's settings, or a stage is one it cannot express); the export says what "
                                     "it writes instead",
                                     TargetOf(chosen.value().kind).name));
  }
  o.json = text.value();
  if (!r.out.empty()) {
    o.files.push_back({r.out, text.value()});
    Lines lines;
    Status companions = StageExportCompanions(o.files, lines, problem.value(), p, format.value(), r.out);
    if (!companions.ok()) return companions.error();
    for (const auto& [label, line] : lines) o.messages.push_back(line);
  } else {
    o.out = text.value();
  }
  return o;
}

}  // namespace

Command ExportCommand() {
  return MakeCommand<ExportRequest, ExportOptions, RunExport>(
      "export",
      "Write a plan as configuration for the launcher that runs it: " + FormatsWithWhatTheyHold() + ".");
}

}  // namespace bmpipe::app

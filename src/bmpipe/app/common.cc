#include "bmpipe/app/common.h"

#include <filesystem>

#include <fmt/format.h>

#include "bmpipe/core/text.h"
#include "bmpipe/frameworks/formats.h"
#include "bmpipe/report/chrome_trace.h"
#include "bmpipe/report/svg.h"
#include "bmpipe/sim/simulator.h"

namespace bmpipe::app {

const char* const kTraceHelp =
    "Write the simulated timeline as a Chrome trace (JSON: one process per rank with its ops and a memory counter) "
    "to this file, to open in Perfetto or chrome://tracing beside a real profile";

void AddSvgOptions(OptionTable& t, SvgRequest& svg, const std::string& help) {
  t.Add("--svg", "", &svg.path, help);
  t.Add("--svg-window", "", &svg.window,
        "With --svg: draw only this time window, START:END in seconds from the iteration's start (either may be left "
        "out), for production-size runs");
  t.Add("--svg-ranks", "", &svg.ranks, "With --svg: draw only these ranks, e.g. 0-3,8");
}

Status CheckSvg(const SvgRequest& svg, const Problem& problem, int panels) {
  if (svg.path.empty()) {
    if (!svg.window.empty() || !svg.ranks.empty()) return InvalidInput("--svg-window and --svg-ranks need --svg FILE");
    return {};
  }
  Result<TimelineView> view = ParseTimelineView(svg.window, svg.ranks, problem);
  if (!view.ok()) return view.error();
  return CheckTimelineSize(problem, panels, view.value());
}

Status StageExportCompanions(Files& files, Lines& lines, const Problem& problem, const Plan& plan, FrameworkId format,
                             const std::string& path) {
  if (format != FrameworkId::kTorchTitan) return {};
  Result<std::string> csv = ExportPlan(problem, plan, FrameworkId::kTorch, TargetKind::kTorch);
  if (!csv.ok()) return csv.error();
  const std::string beside = (std::filesystem::path(path).parent_path() / "schedule.csv").string();
  files.push_back({beside, csv.value()});
  lines.push_back({"export", "schedule.csv, which the torchtitan arguments name, written to " + beside});
  return {};
}

Status StageSvg(Files& files, const SvgRequest& svg, const Problem& problem, const std::string& title,
                const std::vector<std::pair<std::string, Plan>>& plans) {
  if (Status size = CheckSvg(svg, problem, static_cast<int>(plans.size())); !size.ok()) return size;
  Result<TimelineView> view = ParseTimelineView(svg.window, svg.ranks, problem);
  if (!view.ok()) return view.error();
  std::vector<TimelinePanel> panels;
  SimOptions options;
  options.record_memory = true;
  for (const auto& [label, plan] : plans) {
    Result<SimResult> sim = SimulatePlan(problem, plan, options);
    if (!sim.ok()) return sim.error();
    panels.push_back({label, plan, sim.value()});
  }
  Result<std::string> text = TimelineSvg(problem, title, panels, view.value());
  if (!text.ok()) return text.error();
  files.push_back({svg.path, text.value()});
  return {};
}

Status StageTrace(Files& files, const std::string& path, const Problem& problem, const Plan& plan,
                  const std::string& title, ReportHeader& header) {
  Result<std::string> trace = PlanChromeTrace(problem, plan, title);
  if (!trace.ok()) return trace.error();
  files.push_back({path, trace.value()});
  header.lines.push_back({"trace", "written to " + path + " (Chrome trace: Perfetto, chrome://tracing)"});
  return {};
}

void AddProgressOption(OptionTable& t, std::string& progress) {
  t.Add("--progress", "", &progress,
        "Progress on standard error while it works (after its first second): bar (one line redrawn in place), lines "
        "(a JSON object per line: phase, elapsed_s, best_s, bound_s, gap, nodes, done, total), none, or auto (bar on "
        "a terminal, else lines)")
      .Choices({"auto", "bar", "lines", "none"})
      .ShowDefault();
}

std::string TargetOptionHelp() {
  return TargetHelp(
      "The framework that will run the plan; the plan is the best it runs unmodified (default: the --export format's "
      "framework, else any). A training setup the framework cannot run (e.g. DeepSpeed with --zero 2 or 3, torchtitan "
      "with --precision fp8) is refused with the fix (docs/targets.md, \"Training setups\"):");
}

Result<ChosenTarget> ChooseTarget(const std::string& target, const std::optional<FrameworkId>& format) {
  if (!target.empty()) {
    Result<TargetKind> kind = ParseTarget(target);
    if (!kind.ok()) return kind.error();
    return ChosenTarget{kind.value(), "--target"};
  }
  if (format) {
    return ChosenTarget{DefaultTarget(*format), "the default for --export " + std::string(FrameworkOf(*format).format)};
  }
  return ChosenTarget{TargetKind::kAny, "the default; --target names a framework"};
}

Status TargetRunsProblemSetup(TargetKind kind, const Problem& problem) {
  return problem.training ? TargetRunsSetup(kind, *problem.training, &problem.pipeline) : Status{};
}

Lines TargetLines(const ChosenTarget& chosen, const TargetPlan& planned, const std::optional<TargetPlan>& any) {
  const Target& target = TargetOf(chosen.kind);
  auto found = [](const TargetPlan& p) {
    return p.planner.status != ModelStatus::kInfeasible && p.planner.status != ModelStatus::kNoSolution;
  };
  Lines lines;
  lines.push_back({"target", fmt::format("{}: {} ({})", target.name, target.framework, chosen.why)});
  if (!planned.setting.empty()) {
    lines.push_back({"setting", fmt::format("{} (the best of {} settings)", planned.setting, planned.settings)});
  }
  if (any && found(*any) && found(planned)) {
    const double gain = static_cast<double>(planned.planner.iteration_ns) / static_cast<double>(any->planner.iteration_ns);
    lines.push_back({"per-layer", fmt::format("{} ({:.3f}x this plan{}), with per-layer recomputation that {} cannot "
                                              "run unmodified: --target any",
                                              FormatDuration(any->planner.iteration_ns), gain,
                                              any->planner.status == ModelStatus::kOptimal ? ", proven optimal" : "",
                                              target.name)});
  } else if (any && planned.planner.status == ModelStatus::kInfeasible && found(*any)) {
    lines.push_back({"per-layer", fmt::format("{} fits, with per-layer recomputation {} cannot run unmodified: "
                                              "--target any",
                                              FormatDuration(any->planner.iteration_ns), target.name)});
  }
  return lines;
}

std::string StoppedBy(const std::string& stopped_by, const std::string& limit_name, const Context& context) {
  if (!context.Interrupted() || stopped_by.empty()) return stopped_by;
  std::string out = stopped_by;
  for (std::size_t at = out.find(limit_name); !limit_name.empty() && at != std::string::npos;
       at = out.find(limit_name, at + 1)) {
    out.replace(at, limit_name.size(), context.stopped_by());
  }
  return out;
}

Output Emit(Files files, const std::string& out_path, bool print_json, std::string json_text, std::string report) {
  Output o;
  o.files = std::move(files);
  if (!out_path.empty()) o.files.push_back({out_path, json_text});
  o.out = print_json ? json_text : std::move(report);
  o.json = std::move(json_text);
  return o;
}

}  // namespace bmpipe::app

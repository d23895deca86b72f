// What several commands share: the timeline files (--svg, --trace), --progress, the target a
// command plans for and the report's lines on it, and the end of a command that succeeded.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bmpipe/app/command.h"
#include "bmpipe/core/options.h"
#include "bmpipe/frameworks/settings.h"
#include "bmpipe/problem/plan.h"
#include "bmpipe/problem/problem.h"
#include "bmpipe/report/report.h"

namespace bmpipe::app {

using Lines = std::vector<std::pair<std::string, std::string>>;
using Files = std::vector<std::pair<std::string, std::string>>;

// --svg and what of the timeline it draws (--svg-window, --svg-ranks).
struct SvgRequest {
  std::string path;
  std::string window;
  std::string ranks;
};
void AddSvgOptions(OptionTable& table, SvgRequest& svg, const std::string& help);
// Checks --svg's view of `problem` before the work (none without --svg).
Status CheckSvg(const SvgRequest& svg, const Problem& problem, int panels);
// Stages the timeline of `plans` (each simulated again with its memory trace) for --svg.
Status StageSvg(Files& files, const SvgRequest& svg, const Problem& problem, const std::string& title,
                const std::vector<std::pair<std::string, Plan>>& plans);
// Stages the Chrome trace of `plan` for `path` and says so in the report's header.
Status StageTrace(Files& files, const std::string& path, const Problem& problem, const Plan& plan,
                  const std::string& title, ReportHeader& header);
// Stages the files an export written to `path` names beside itself (torchtitan's schedule CSV,
// bmpipe's op order for torch.distributed.pipelining) and says so in `lines`: every file an export
// names exists.
Status StageExportCompanions(Files& files, Lines& lines, const Problem& problem, const Plan& plan, FrameworkId format,
                             const std::string& path);
// --trace's help.
extern const char* const kTraceHelp;

// --progress (the command line only).
void AddProgressOption(OptionTable& table, std::string& progress);

// The --target help.
std::string TargetOptionHelp();

// The target a command plans for: --target, else the framework --export writes for, else any.
struct ChosenTarget {
  TargetKind kind = TargetKind::kAny;
  std::string why;  // how it was chosen, for the report
};
Result<ChosenTarget> ChooseTarget(const std::string& target, const std::optional<FrameworkId>& format);
// The chosen target must run the problem's training setup (TargetRunsSetup).
Status TargetRunsProblemSetup(TargetKind kind, const Problem& problem);
// The report's lines on the target, and on what the per-layer plan would gain over it.
Lines TargetLines(const ChosenTarget& chosen, const TargetPlan& planned, const std::optional<TargetPlan>& any);

// Where a limit named `limit_name` is said to have stopped the work, Ctrl-C did when it was given.
std::string StoppedBy(const std::string& stopped_by, const std::string& limit_name, const Context& context);

// The output of a command that succeeded: its files and the JSON to --out, then the JSON or the
// report on standard output.
Output Emit(Files files, const std::string& out_path, bool print_json, std::string json_text, std::string report);

}  // namespace bmpipe::app

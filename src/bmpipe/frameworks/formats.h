// Plans written for the frameworks that run them and read back from their configurations
// (docs/exports.md): each framework's export and reader (framework.h's rows) behind one entry
// point each, and the format of a file told from its content.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "bmpipe/core/error.h"
#include "bmpipe/frameworks/framework.h"
#include "bmpipe/io/plan_json.h"
#include "bmpipe/problem/plan.h"
#include "bmpipe/problem/problem.h"

namespace bmpipe {

// The export's text (deterministic) for the framework of `format`, run by `target` (one of that
// framework's targets; megatron-local picks Megatron's local layer spec). Fails when the target
// does not run the pipeline's schedule or the problem's training setup, or when the format cannot
// express the plan at all (for example MindFormers needs every stage to hold a decoder layer).
Result<std::string> ExportPlan(const Problem& problem, const Plan& plan, FrameworkId format,
                               TargetKind target = TargetKind::kMegatron);

// A plan file's format: bmpipe's plan file (JSON or YAML), or a framework's configuration.
struct PlanFormat {
  std::optional<FrameworkId> framework;  // none: the plan file
  bool operator==(const PlanFormat& other) const { return framework == other.framework; }
  bool operator!=(const PlanFormat& other) const { return !(*this == other); }
};
inline constexpr PlanFormat kPlanFile{};

std::vector<std::string> PlanFormatNames();  // json, then FormatNames()
std::string PlanFormatName(PlanFormat format);
Result<PlanFormat> ParsePlanFormat(const std::string& name);

// The format of a plan file from its content: each framework's detector in its order (a schedule
// CSV row, torchtitan arguments, a Python module naming DeepSpeed, Megatron flags, a MindFormers
// YAML), else a plan file. Fails only for text that looks like a framework's but cannot be (a
// Python module of neither DeepSpeed nor torchtitan).
Result<PlanFormat> DetectPlanFormat(const std::string& text);

// The plan `text` describes for `problem`. `notes`, when given, receives what was not read
// (flags that do not describe the plan). Errors name the flag or key, its value and the fix.
Result<Plan> ReadLauncherPlan(const std::string& text, PlanFormat format, const Problem& problem,
                              const std::string& source, std::vector<std::string>* notes = nullptr);

// The training setup a launcher's file states (--setup-from; framework.h's LauncherSetup): the
// framework told from the content as for plans; an error naming the formats read for any other.
Result<LauncherSetup> ReadLauncherSetup(const std::string& text, const std::string& source);

struct LoadedPlan {
  PlanDocument document;
  PlanFormat format;
  std::vector<std::string> notes;
};

// The plan `text` (from `source`, for messages) in any of the formats: `format`, or detected.
Result<LoadedPlan> ReadAnyPlan(const std::string& text, std::optional<PlanFormat> format, const Problem& problem,
                               const std::string& source);
// The plan file at `path` in any of the formats: `format`, or detected from the content. Plan
// JSON/YAML reads exactly as LoadPlan reads it (with the solver the file names).
Result<LoadedPlan> LoadAnyPlan(const std::string& path, std::optional<PlanFormat> format, const Problem& problem);

}  // namespace bmpipe

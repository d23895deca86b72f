#include "bmpipe/frameworks/formats.h"

#include <algorithm>

#include <fmt/format.h>

#include "bmpipe/core/json_cursor.h"
#include "bmpipe/frameworks/megatron/megatron.h"
#include "bmpipe/frameworks/mindformers/mindformers.h"
#include "bmpipe/frameworks/torchtitan/torchtitan.h"

namespace bmpipe {
namespace {

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(line);
    start = end + 1;
  }
  return lines;
}

}  // namespace

Result<std::string> ExportPlan(const Problem& problem, const Plan& plan, FrameworkId format, TargetKind target) {
  Status valid = ValidatePlan(problem, plan);
  if (!valid.ok()) return valid.error();
  const Framework& framework = FrameworkOf(format);
  // The target that runs it: `target` when it is one of the framework's, else the format's own.
  const Target& given = TargetOf(target);
  const TargetKind runs = given.runs_on == format ? target : framework.target;
  if (problem.training) {
    if (Status setup = TargetRunsSetup(runs, *problem.training, &problem.pipeline); !setup.ok()) return setup.error();
  }
  if (Status pipeline = TargetRunsPipeline(runs, problem.pipeline); !pipeline.ok()) return pipeline.error();
  return framework.write(problem, plan, runs);
}

std::vector<std::string> PlanFormatNames() {
  std::vector<std::string> names = {"json"};
  for (const std::string& name : FormatNames()) names.push_back(name);
  return names;
}

std::string PlanFormatName(PlanFormat format) {
  return format.framework ? std::string(FrameworkOf(*format.framework).format) : "json";
}

Result<PlanFormat> ParsePlanFormat(const std::string& name) {
  if (name == "json") return kPlanFile;
  for (const Framework& f : Frameworks()) {
    if (f.format == name) return PlanFormat{f.id};
  }
  const std::vector<std::string> names = PlanFormatNames();
  return InvalidInput(fmt::format("--plan-format {}: unknown format{}; formats: {}", name, DidYouMean(name, names),
                                  fmt::join(names, ", ")));
}

namespace {

// Whether `text` can be a JSON object or a YAML mapping: its first line that is not blank or a
// comment opens an object or holds "key:". A command line's first flag ("--num-layers 4") cannot,
// which spares argument files a YAML parse of their whole text.
bool MayBeMapping(const std::string& text) {
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    const std::size_t first = text.find_first_not_of(" \t\r", at);
    if (first < end && text[first] != '#') {
      if (text[first] == '{' || text.compare(first, 3, "---") == 0) return true;
      if (text.compare(first, 2, "--") == 0) return false;
      return text.find(':', first) < end;
    }
    at = end + 1;
  }
  return false;
}

}  // namespace

Result<PlanFormat> DetectPlanFormat(const std::string& text) {
  PlanText plan_text{text, {}};
  for (const std::string& line : Lines(text)) {
    const std::size_t first = line.find_first_not_of(" \t");
    if (first != std::string::npos && line[first] != '#') plan_text.code.push_back(line.substr(first));
  }
  if (plan_text.code.empty()) return kPlanFile;  // the document reader says it is empty
  // Structure first: a JSON or YAML mapping with a plan's stages is bmpipe's plan, one with
  // MindFormers' sections is MindFormers', whatever text their strings hold (a description that
  // mentions --num-layers, a folded line that starts with a flag).
  if (const Result<Json> doc = MayBeMapping(text) ? ParseDocument(text, "") : Result<Json>(Json());
      doc.ok() && doc.value().is_object()) {
    if (doc.value().contains("stages")) return kPlanFile;
    if (IsMindFormersDocument(doc.value())) return PlanFormat{FrameworkId::kMindFormers};
  }
  std::vector<const Framework*> order;
  for (const Framework& f : Frameworks()) order.push_back(&f);
  std::sort(order.begin(), order.end(), [](const Framework* a, const Framework* b) { return a->detect_order < b->detect_order; });
  for (const Framework* f : order) {
    Result<bool> is = f->detect(plan_text);
    if (!is.ok()) return is.error();
    if (is.value()) return PlanFormat{f->id};
  }
  return kPlanFile;
}

Result<Plan> ReadLauncherPlan(const std::string& text, PlanFormat format, const Problem& problem,
                              const std::string& source, std::vector<std::string>* notes) {
  if (Status valid = CheckDocumentText(text, source); !valid.ok()) return valid.error();
  std::vector<std::string> unused;
  std::vector<std::string>& out = notes ? *notes : unused;
  if (!format.framework) {
    Result<Json> doc = ParseDocument(text, source);
    if (!doc.ok()) return doc.error();
    Result<PlanDocument> plan = ReadPlan(doc.value(), problem, source);
    if (!plan.ok()) return plan.error();
    return plan.value().plan;
  }
  const Framework& framework = FrameworkOf(*format.framework);
  if (framework.read == nullptr) return InvalidInput(fmt::format("{}: {}", source, framework.why_not_read));
  return framework.read(text, problem, source, out);
}

Result<LauncherSetup> ReadLauncherSetup(const std::string& text, const std::string& source) {
  if (Status valid = CheckDocumentText(text, source); !valid.ok()) return valid.error();
  // A Megatron-Bridge configuration is a YAML document, read apart from the plan formats.
  if (const Result<Json> doc = MayBeMapping(text) ? ParseDocument(text, source) : Result<Json>(Json());
      doc.ok() && IsMegatronBridgeConfig(doc.value())) {
    return ReadMegatronBridgeSetup(doc.value(), source);
  }
  // So is a torchtitan job configuration, in TOML.
  if (IsTorchTitanToml(text)) return ReadTorchTitanSetup(text, source);
  std::vector<std::string> readable;
  for (const Framework& f : Frameworks()) {
    if (f.read_setup) readable.push_back(std::string(f.format));
  }
  Result<PlanFormat> format = DetectPlanFormat(text);
  if (!format.ok()) return InvalidInput(source + ": " + format.error().message);
  if (!format.value().framework || FrameworkOf(*format.value().framework).read_setup == nullptr) {
    return InvalidInput(fmt::format("--setup-from {}: the training setup is read from {} launcher files (Megatron-LM "
                                    "arguments, a Megatron-Bridge ConfigContainer's YAML, a torchtitan TOML job or arguments); this is {}",
                                    source, fmt::join(readable, ", "),
                                    format.value().framework ? "a " + PlanFormatName(format.value()) + " configuration"
                                                             : "none of them"));
  }
  return FrameworkOf(*format.value().framework).read_setup(text, source);
}

Result<LoadedPlan> ReadAnyPlan(const std::string& text, std::optional<PlanFormat> format, const Problem& problem,
                               const std::string& source) {
  LoadedPlan loaded;
  if (format) {
    loaded.format = *format;
  } else {
    if (Status valid = CheckDocumentText(text, source); !valid.ok()) return valid.error();
    Result<PlanFormat> detected = DetectPlanFormat(text);
    if (!detected.ok()) return InvalidInput(source + ": " + detected.error().message);
    loaded.format = detected.value();
  }
  if (!loaded.format.framework) {
    // As LoadPlan reads it, with the solver the file names.
    Result<Json> doc = ParseDocument(text, source);
    if (!doc.ok()) return doc.error();
    Result<PlanDocument> plan = ReadPlan(doc.value(), problem, source);
    if (!plan.ok()) return plan.error();
    loaded.document = plan.value();
    return loaded;
  }
  Result<Plan> plan = ReadLauncherPlan(text, loaded.format, problem, source, &loaded.notes);
  if (!plan.ok()) return plan.error();
  loaded.document.plan = plan.value();
  return loaded;
}

Result<LoadedPlan> LoadAnyPlan(const std::string& path, std::optional<PlanFormat> format, const Problem& problem) {
  Result<std::string> text = LoadText(path);
  if (!text.ok()) return text.error();
  return ReadAnyPlan(text.value(), format, problem, path);
}

}  // namespace bmpipe

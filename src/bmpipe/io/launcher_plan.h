// Reading a launcher's configuration back as a plan, so that `simulate` can say how long the
// configuration a run uses would take (docs/exports.md, "Reading configurations back"):
//  - megatron: Megatron-LM arguments, one or more per line or one command line, '#' comments,
//    shell quoting. The stages come from --pipeline-model-parallel-layout, or from
//    --decoder-first/last-pipeline-num-layers, --account-for-embedding/loss-in-pipeline-split and
//    the even split, with the virtual stages of --num-virtual-stages-per-pipeline-rank or
//    --num-layers-per-virtual-pipeline-stage; recomputation from --recompute-granularity,
//    --recompute-method, --recompute-num-layers and --recompute-modules. The parallel and batch
//    flags are checked against the problem's `training` section. Flags that do not describe the
//    plan (--hidden-size, --lr, the launcher's own...) are not read; the notes list them.
//  - deepspeed: the Python module `export --to deepspeed` writes, read for its literal top-level
//    assignments (num_stages, parts, activation_checkpoint_interval, checkpoint_layers, ds_config);
//    nothing is executed.
//  - torchtitan: the argument file `export --to torchtitan` writes (torchtitan 0.3.0 arguments).
//  - mindformers: a MindFormers YAML (ReadMindFormersPlan); json: the plan JSON or YAML (ReadPlan).
//  - csv: a torch.distributed.pipelining schedule CSV fixes the op order, not the stages: refused.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "bmpipe/core/error.h"
#include "bmpipe/io/plan_json.h"
#include "bmpipe/problem/plan.h"
#include "bmpipe/problem/problem.h"

namespace bmpipe {

enum class PlanFormat { kJson, kMindFormers, kMegatron, kDeepSpeed, kTorchTitan, kCsv };

std::vector<std::string> PlanFormatNames();  // json, mindformers, megatron, deepspeed, torchtitan, csv
std::string PlanFormatName(PlanFormat format);
Result<PlanFormat> ParsePlanFormat(const std::string& name);

// The format of a plan file from its content: a schedule CSV row, Megatron flags, a Python module
// naming DeepSpeed, torchtitan arguments, else a document (a MindFormers YAML when it has
// parallel_config or recompute_config and no stages, else plan JSON/YAML). Fails only for text
// that looks like a Python module of neither framework.
Result<PlanFormat> DetectPlanFormat(const std::string& text);

// The plan `text` describes for `problem`. `notes`, when given, receives what was not read
// (flags that do not describe the plan). Errors name the flag or key, its value and the fix.
Result<Plan> ReadLauncherPlan(const std::string& text, PlanFormat format, const Problem& problem,
                              const std::string& source, std::vector<std::string>* notes = nullptr);

struct LoadedPlan {
  PlanDocument document;
  PlanFormat format = PlanFormat::kJson;
  std::vector<std::string> notes;
};

// The plan file at `path` in any of the formats: `format`, or detected from the content. Plan
// JSON/YAML and MindFormers YAML read exactly as LoadPlan reads them.
Result<LoadedPlan> LoadAnyPlan(const std::string& path, std::optional<PlanFormat> format, const Problem& problem);

}  // namespace bmpipe

// MindFormers, bmpipe's target mindformers: its per-stage recomputation counts (taken from each
// stage's first layer: full, then select and select_comm together, then one of them) as a stage
// space and the order it runs them in, and the YAML lists bmpipe writes for it and reads back
// (offset, recompute, select_recompute, select_comm_recompute, pipeline_stage, micro_batch_num,
// pp_interleave_num; offsets sum to L mod (P*V)).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "bmpipe/core/document.h"
#include "bmpipe/core/error.h"
#include "bmpipe/frameworks/framework.h"
#include "bmpipe/problem/plan.h"
#include "bmpipe/problem/problem.h"

namespace bmpipe {

Status MindFormersSettings(const Problem& problem, const Target& target, const SettingSink& offer, int max_block);
// The plan MindFormers runs from a plan's per-stage counts: each stage's options in its order.
std::optional<Plan> MindFormersCanonical(const Problem& problem, Plan plan);

Result<std::string> ExportMindFormers(const Problem& problem, const Plan& plan, TargetKind target);

// The MindFormers lists read back into a plan for `problem`: model.model_config.offset,
// recompute_config.{recompute, select_recompute, select_comm_recompute},
// parallel_config.{pipeline_stage, micro_batch_num}, model.model_config.{num_layers,
// pp_interleave_num} (the embedding on the first stage, the head on the last). A full MindFormers
// YAML has many more keys (optimizer, runner, context...); they do not describe the plan and are
// not read.
Result<Plan> ReadMindFormersPlan(const Json& doc, const Problem& problem, const std::string& source);
Result<Plan> ReadMindFormers(const std::string& text, const Problem& problem, const std::string& source,
                             std::vector<std::string>& notes);
// A document with parallel_config or recompute_config and no stages.
Result<bool> DetectMindFormers(const PlanText& text);
// Whether a parsed document is a MindFormers configuration (DetectMindFormers' test).
bool IsMindFormersDocument(const Json& doc);

}  // namespace bmpipe

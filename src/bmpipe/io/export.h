// A plan written for the launcher that runs it (docs/exports.md, docs/targets.md):
//  - megatron: a file of Megatron-LM arguments, one per line: the training run's parallel sizes,
//    batch, sequence parallelism, optimizer sharding and overlap (from the problem's `training`),
//    --pipeline-model-parallel-layout (chunk-major, E / t / L; none for a single stage) and the
//    recomputation setting of the megatron target that is exactly the plan's; when the plan is
//    not one Megatron runs, the best setting on its partition, what that costs, and the plan's
//    per-layer list for a patched Megatron.
//  - mindformers: offset (P or VxP), recompute / select_recompute / select_comm_recompute counts,
//    pipeline_stage, micro_batch_num, pp_interleave_num; offsets sum to L mod (P*V).
//  - deepspeed: the partition as PipelineModule `parts` and the activation-checkpoint settings,
//    with what DeepSpeed cannot express said plainly.
//  - torchtitan: module_fqns_per_model_part, the schedule, and the schedule CSV it points to.
//  - csv: the torch.distributed.pipelining schedule CSV: one row per rank of <stage><F|B><mb>
//    actions in the simulated order.
// Layers map to framework names through the problem's shape: the first layer (when its name
// occurs once) is the embedding, the last the head, the others decoder layers 0..L-1.
#pragma once

#include <string>
#include <vector>

#include "bmpipe/core/document.h"
#include "bmpipe/core/error.h"
#include "bmpipe/problem/plan.h"
#include "bmpipe/problem/problem.h"
#include "bmpipe/target/target.h"

namespace bmpipe {

enum class ExportFormat { kMegatron, kMindFormers, kDeepSpeed, kTorchTitan, kCsv };

std::vector<std::string> ExportFormatNames();  // megatron, mindformers, deepspeed, torchtitan, csv
Result<ExportFormat> ParseExportFormat(const std::string& name);
// The target whose plans a format expresses (csv: torch).
TargetKind DefaultTarget(ExportFormat format);

// The export's text (deterministic). Fails when the format cannot express the plan at all (for
// example MindFormers needs every stage to hold at least one decoder layer).
// `target` picks Megatron's layer spec (megatron-local: the local one; else Transformer Engine's).
Result<std::string> ExportPlan(const Problem& problem, const Plan& plan, ExportFormat format,
                               TargetKind target = TargetKind::kMegatron);

// The MindFormers lists read back into a plan for `problem` (offsets and recomputation counts;
// the embedding on the first stage, the head on the last).
Result<Plan> ReadMindFormersPlan(const Json& doc, const Problem& problem, const std::string& source);

}  // namespace bmpipe

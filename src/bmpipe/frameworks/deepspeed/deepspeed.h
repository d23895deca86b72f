// DeepSpeed, bmpipe's target deepspeed: whole-layer checkpointing chosen per layer, its pipeline
// engine's rules, and the Python module bmpipe writes for it (a PipelineModule subclass with the
// plan's parts and checkpointed layers, and the ds_config) and reads back (its literal top-level
// assignments: num_stages, parts, activation_checkpoint_interval, checkpoint_layers, ds_config;
// nothing is executed).
#pragma once

#include <string>
#include <vector>

#include "bmpipe/core/error.h"
#include "bmpipe/frameworks/framework.h"
#include "bmpipe/problem/plan.h"
#include "bmpipe/problem/problem.h"

namespace bmpipe {

Status DeepSpeedSettings(const Problem& problem, const Target& target, const SettingSink& offer, int max_block);
Status DeepSpeedRules(const Target& target, const TrainingInfo& training, const Pipeline* pipeline);
Result<std::string> ExportDeepSpeed(const Problem& problem, const Plan& plan, TargetKind target);
Result<Plan> ReadDeepSpeed(const std::string& text, const Problem& problem, const std::string& source,
                           std::vector<std::string>& notes);
// A Python module naming DeepSpeed or PipelineModule; an error for a Python module that names
// neither it nor torchtitan.
Result<bool> DetectDeepSpeed(const PlanText& text);

}  // namespace bmpipe

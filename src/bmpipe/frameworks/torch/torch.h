// torch.distributed.pipelining, bmpipe's target torch: any option with a known meaning on any
// layer (the model's own checkpointing code, as bmpipe.torch applies it), every schedule whose
// stages sit on one rank each, and the schedule CSV its runtime loads: one row per rank of
// <stage><F|B|I|W><micro-batch> actions in the simulated order. A CSV fixes the op order, not the
// stages: it is not read back as a plan.
#pragma once

#include <string>
#include <string_view>

#include "bmpipe/core/error.h"
#include "bmpipe/frameworks/framework.h"
#include "bmpipe/problem/plan.h"
#include "bmpipe/problem/problem.h"

namespace bmpipe {

Status TorchSettings(const Problem& problem, const Target& target, const SettingSink& offer, int max_block);
Result<std::string> ExportTorchCsv(const Problem& problem, const Plan& plan, TargetKind target);
// The first line of code is a row of actions (0F3, 2B1, 1SEND_F0, or empty cells).
Result<bool> DetectTorchCsv(const PlanText& text);

inline constexpr std::string_view kScheduleCsvFixesNoPlan =
    "a pipeline schedule CSV fixes the order of the ops, not the stages or the recomputation; give the plan (plan "
    "JSON) or the launcher configuration that names this CSV (e.g. the torchtitan arguments)";

}  // namespace bmpipe

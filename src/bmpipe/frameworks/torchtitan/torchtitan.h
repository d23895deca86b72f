// torchtitan, bmpipe's target torchtitan: activation_checkpoint mode none or full for every
// decoder layer, the schedules torch.distributed.pipelining names a class for, and the argument
// file bmpipe writes for its trainer (torchtitan 0.3.0: module_fqns_per_model_part, the schedule
// and the schedule CSV it points to) and reads back.
#pragma once

#include <string>
#include <vector>

#include "bmpipe/core/error.h"
#include "bmpipe/frameworks/framework.h"
#include "bmpipe/problem/plan.h"
#include "bmpipe/problem/problem.h"

namespace bmpipe {

Status TorchTitanSettings(const Problem& problem, const Target& target, const SettingSink& offer, int max_block);
Result<std::string> ExportTorchTitan(const Problem& problem, const Plan& plan, TargetKind target);
Result<Plan> ReadTorchTitan(const std::string& text, const Problem& problem, const std::string& source,
                            std::vector<std::string>& notes);
// Lines starting with --parallelism., --training. or activation_checkpoint:.
Result<bool> DetectTorchTitan(const PlanText& text);
// The training setup of a torchtitan job (--setup-from): its TOML job configuration or the
// argument file bmpipe writes (torchtitan 0.3).
Result<LauncherSetup> ReadTorchTitanSetup(const std::string& text, const std::string& source);
// Whether `text` is a TOML job configuration ([parallelism], [training], [activation_checkpoint]
// or [job] tables).
bool IsTorchTitanToml(const std::string& text);

}  // namespace bmpipe

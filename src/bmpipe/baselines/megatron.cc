// Megatron-LM's best: any split --pipeline-model-parallel-layout expresses with any global
// recomputation setting of the layer spec, planned exactly within that space (the megatron target,
// frameworks/megatron).

#include <fmt/format.h>

#include "bmpipe/baselines/common.h"
#include "bmpipe/frameworks/megatron/megatron.h"
#include "bmpipe/frameworks/settings.h"

namespace bmpipe {

BaselineResult RunMegatron(const Problem& problem, TargetKind spec, const Deadline& deadline) {
  PlannerOptions options;
  // The baseline's time is its share of the comparison's: the settings share it.
  options.time_limit_s = deadline.SecondsLeft();
  options.deadline = deadline;
  Result<TargetPlan> planned = PlanForTarget(problem, spec, options);
  if (!planned.ok()) return NotApplicable(planned.error().message);
  const PlannerResult& r = planned.value().planner;
  BaselineResult result;
  if (!r.stopped_by.empty()) result.stopped_by = kStoppedByTimeLimit;
  if (r.status == ModelStatus::kOptimal || r.status == ModelStatus::kFeasible) {
    result.has_plan = result.fits = true;
    result.plan = r.plan;
    result.config = fmt::format("--pipeline-model-parallel-layout \"{}\", {}", MegatronLayout(problem, r.plan),
                                planned.value().setting);
    if (r.status == ModelStatus::kFeasible) result.config += fmt::format(" (the best found; within {:.2f}%)", 100 * r.gap);
  } else if (r.status == ModelStatus::kInfeasible) {
    result.config = "no layout and recomputation setting fits";
  }
  return result;
}

}  // namespace bmpipe

// Merak (HPDL-Group/Merak): a time-balanced partition, then its stage-aware recomputation rule
// (Merak/core/pipeline/module.py): from one ratio r0, stage i < S-1 checkpoints the fraction
// 1 - (1 - r0)(S-1)/(S-1-i) of its layers (nothing when that is <= 0) and the last stage none,
// because earlier stages hold more micro-batches in flight. Checkpointing a layer is full
// recomputation; r0 is swept over [0, 1] in steps of 0.01 and the fastest plan that fits is
// Merak's best.
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "bmpipe/baselines/common.h"

namespace bmpipe {

BaselineResult RunMerak(const Problem& problem, const Deadline& deadline) {
  BaselineResult result;
  if (problem.pipeline.chunks > 1) {
    return NotApplicable("Merak's schedules have no interleaving");
  }
  const int stages = problem.pipeline.stages();
  const ModelShape shape = ShapeOf(problem);
  const std::vector<OptionIdx> none = NoneOptions(problem);
  bool stopped = false;
  const std::vector<LayerIdx> end = MinMaxPartition(
      problem, stages, [&](StageIdx, LayerIdx b, LayerIdx e) { return ComputeNs(problem, b, e, none); }, deadline,
      &stopped);
  if (stopped) {
    result.stopped_by = kStoppedByTimeLimit;
    return result;
  }
  const Plan base = PlanWithEnds(problem, end);
  PlanPicker picker(problem);
  std::set<std::vector<int>> seen;
  for (int step = 0; step <= 100; ++step) {
    if (deadline.Expired()) {
      result.stopped_by = kStoppedByTimeLimit;
      break;
    }
    const double r0 = step / 100.0;
    std::vector<int> counts(stages, 0);
    Plan plan = base;
    const std::vector<double> ratios = MerakCheckpointRatios(stages, r0);
    for (StageIdx s = 0; s < stages; ++s) {
      const double ratio = ratios[s];
      if (ratio <= 0) continue;
      int body = 0;
      for (LayerIdx l = plan.begin(s); l < plan.end(s); ++l) body += l >= shape.body_begin && l < shape.body_end;
      counts[s] = static_cast<int>(std::lround(ratio * body));
      int done = 0;
      for (LayerIdx l = plan.begin(s); l < plan.end(s) && done < counts[s]; ++l) {
        if (l < shape.body_begin || l >= shape.body_end) continue;
        plan.option[l] = FullOption(problem.layers[l]);
        ++done;
      }
    }
    if (!seen.insert(counts).second) continue;
    picker.Offer(plan, fmt::format("layers per stage {}, r0 = {:.2f}: checkpointed layers [{}]", StageSizes(end), r0,
                                   fmt::join(counts, ", ")));
  }
  picker.Fill(result);
  return result;
}

}  // namespace bmpipe

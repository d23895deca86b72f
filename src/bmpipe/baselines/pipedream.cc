// PipeDream's planner (msr-fiddle/pipedream, optimizer_graph_hierarchical.py), on one level: the
// contiguous partition minimizing the slowest stage's compute, each stage within memory with
// the activations it holds in flight, and no recomputation.
#include <limits>

#include "bmpipe/baselines/common.h"

namespace bmpipe {

BaselineResult RunPipeDream(const Problem& problem, const Deadline& deadline) {
  BaselineResult result;
  if (problem.pipeline.chunks > 1) {
    return NotApplicable("PipeDream's planner has no interleaved schedule");
  }
  const StageMemory memory(problem);
  const std::vector<OptionIdx> none = NoneOptions(problem);
  bool stopped = false;
  const std::vector<LayerIdx> end = MinMaxPartition(
      problem, problem.pipeline.stages(),
      [&](StageIdx s, LayerIdx b, LayerIdx e) {
        return memory.Fits(s, b, e, none) ? ComputeNs(problem, b, e, none) : std::numeric_limits<double>::infinity();
      },
      deadline, &stopped);
  PlanPicker picker(problem);
  if (!end.empty()) picker.Offer(PlanWithEnds(problem, end), "layers per stage " + StageSizes(end) + ", no recomputation");
  picker.Fill(result);
  if (stopped) result.stopped_by = kStoppedByTimeLimit;
  if (!result.has_plan && !stopped) result.config = "no partition fits without recomputation";
  return result;
}

}  // namespace bmpipe

#include "bmpipe/solve/envelope_bound.h"

#include <algorithm>

#include "bmpipe/solve/planner.h"

namespace bmpipe {

std::optional<Problem> EnvelopeProblem(const Problem& problem) {
  if (problem.pipeline.overlap) return std::nullopt;
  Problem envelope = problem;
  for (Layer& layer : envelope.layers) {
    LayerOption least = layer.options.front();
    least.name = "envelope";
    least.backward_ns = least.backward_ns + least.recompute_ns;
    for (const LayerOption& o : layer.options) {
      least.forward_ns = std::min(least.forward_ns, o.forward_ns);
      least.backward_ns = std::min(least.backward_ns, o.backward_ns + o.recompute_ns);
    }
    least.recompute_ns = 0;
    least.saved_bytes = 0;
    least.peak_extra_bytes = 0;
    least.forward_comm_ns = 0;
    least.backward_comm_ns = 0;
    layer.options = {least};
    layer.static_bytes = 0;
    layer.weight_grad_bytes = 0;
  }
  return envelope;
}

double EnvelopeBound(const Problem& problem, const Deadline& deadline, double cutoff_ns) {
  const std::optional<Problem> envelope = EnvelopeProblem(problem);
  if (!envelope) return 0;
  PlannerOptions options;
  options.kind = PlannerKind::kBranchAndBound;
  options.time_limit_s = 1e9;  // the deadline limits it
  options.deadline = deadline;
  options.node_limit = 1;
  options.cutoff_ns = cutoff_ns;
  const Result<PlannerResult> r = PlanPipeline(*envelope, options);
  if (!r.ok()) return 0;
  return r.value().status == ModelStatus::kInfeasible ? cutoff_ns : r.value().bound_ns;
}

}  // namespace bmpipe

#include "bmpipe/solve/quick_plan.h"

#include <algorithm>
#include <chrono>

#include "bmpipe/sim/simulator.h"

namespace bmpipe {

std::optional<QuickPlan> FindQuickPlan(const Problem& problem, const Schedule& schedule, const Deadline& deadline,
                                       const StageSpace* space, double* simulation_s) {
  if (simulation_s != nullptr) *simulation_s = 0;
  const int n = problem.num_layers();
  const int stages = problem.pipeline.stages();
  std::size_t most = 1;
  for (const Layer& layer : problem.layers) most = std::max(most, layer.options.size());
  std::optional<QuickPlan> best;
  bool tried = false;
  for (std::size_t o = 0; o < most; ++o) {
    if (tried && deadline.Expired()) break;
    Plan plan;
    std::vector<double> prefix(1, 0);
    for (const Layer& layer : problem.layers) {
      const OptionIdx option = static_cast<OptionIdx>(o < layer.options.size() ? o : 0);
      plan.option.push_back(option);
      const LayerOption& c = layer.options[option];
      prefix.push_back(prefix.back() + static_cast<double>(c.forward_ns + c.backward_ns + c.recompute_ns));
    }
    plan.stage_begin.assign(1, 0);
    for (StageIdx st = 1; st < stages; ++st) {
      const double share = prefix.back() * st / stages;
      LayerIdx cut = static_cast<LayerIdx>(std::lower_bound(prefix.begin(), prefix.end(), share) - prefix.begin());
      cut = std::clamp(cut, plan.stage_begin.back() + 1, n - (stages - st));
      plan.stage_begin.push_back(cut);
    }
    plan.stage_begin.push_back(n);
    if (space != nullptr && !space->Contains(plan)) continue;
    tried = true;
    const auto began = std::chrono::steady_clock::now();
    Result<SimResult> sim = Simulate(schedule, ComputeStageCosts(problem, plan), ComputeRankCosts(problem, plan),
                                     problem.memory_bytes);
    if (simulation_s != nullptr) {
      *simulation_s = std::max(*simulation_s,
                               std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count());
    }
    if (sim.ok() && sim.value().fits && (!best || sim.value().iteration_ns < best->iteration_ns)) {
      best = QuickPlan{std::move(plan), sim.value().iteration_ns};
    }
  }
  return best;
}

}  // namespace bmpipe

#include "bmpipe/problem/plan.h"

#include <algorithm>

#include <fmt/format.h>

namespace bmpipe {

Status ValidatePlan(const Problem& problem, const Plan& plan) {
  const int n = problem.num_layers();
  const int stages = problem.pipeline.stages();
  if (plan.num_stages() != stages) {
    return InvalidInput(fmt::format("the plan has {} stages but the problem has {} (ranks {} x chunks {}{})",
                                    std::max(plan.num_stages(), 0), stages, problem.pipeline.ranks,
                                    problem.pipeline.chunks, problem.pipeline.Copies() > 1 ? " / 2 copies" : ""));
  }
  if (plan.stage_begin.front() != 0) {
    return InvalidInput(fmt::format("stage 0 starts at layer {}; it must start at layer 0", plan.stage_begin.front()));
  }
  for (StageIdx s = 0; s < stages; ++s) {
    if (plan.end(s) <= plan.begin(s)) {
      return InvalidInput(fmt::format("stage {} is empty; every stage needs at least one layer", s));
    }
  }
  if (plan.stage_begin.back() != n) {
    return InvalidInput(fmt::format("the stages cover layers 0..{} but the problem has {} layers (0..{})",
                                    plan.stage_begin.back() - 1, n, n - 1));
  }
  if (static_cast<int>(plan.option.size()) != n) {
    return InvalidInput(fmt::format("the plan chooses options for {} layers; the problem has {}", plan.option.size(), n));
  }
  for (LayerIdx l = 0; l < n; ++l) {
    const int count = static_cast<int>(problem.layers[l].options.size());
    if (plan.option[l] < 0 || plan.option[l] >= count) {
      return InvalidInput(fmt::format("layer {} has option index {}; it has {} options", l, plan.option[l], count));
    }
  }
  return {};
}

StageCost ComputeStageCost(const Problem& problem, const Plan& plan, StageIdx s) {
  StageCost c;
  for (LayerIdx l = plan.begin(s); l < plan.end(s); ++l) {
    const LayerOption& o = problem.layers[l].options[plan.option[l]];
    c.forward_ns += o.forward_ns;
    c.backward_ns += o.backward_ns + o.recompute_ns;
    c.recompute_ns += o.recompute_ns;
    c.weight_grad_ns += problem.layers[l].weight_grad_ns;
    c.saved_bytes += o.saved_bytes;
    c.weight_grad_bytes += problem.layers[l].weight_grad_bytes;
    c.transient_bytes = std::max(c.transient_bytes, o.peak_extra_bytes);
    c.forward_comm_ns += o.forward_comm_ns;
    c.backward_comm_ns += o.backward_comm_ns;
  }
  c.p2p_out_ns = problem.layers[plan.end(s) - 1].p2p_ns;
  return c;
}

std::vector<StageCost> ComputeStageCosts(const Problem& problem, const Plan& plan) {
  std::vector<StageCost> costs;
  costs.reserve(plan.num_stages());
  for (StageIdx s = 0; s < plan.num_stages(); ++s) costs.push_back(ComputeStageCost(problem, plan, s));
  return costs;
}

std::vector<RankCost> ComputeRankCosts(const Problem& problem, const Plan& plan) {
  std::vector<RankCost> ranks(problem.pipeline.ranks);
  for (RankCost& r : ranks) r.static_bytes = problem.reserved_bytes;
  for (StageIdx s = 0; s < plan.num_stages(); ++s) {
    for (int copy = 0; copy < problem.pipeline.Copies(); ++copy) {  // every copy is a full one (DualPipe's)
      RankCost& r = ranks[problem.pipeline.RankOf(s, copy)];
      for (LayerIdx l = plan.begin(s); l < plan.end(s); ++l) {
        r.static_bytes += problem.layers[l].static_bytes;
        r.update_ns += problem.layers[l].update_ns;
      }
    }
  }
  return ranks;
}

std::vector<LayerIdx> StageEnds(const Plan& plan) {
  return std::vector<LayerIdx>(plan.stage_begin.begin() + 1, plan.stage_begin.end());
}

Plan EvenPlan(const Problem& problem) {
  const int stages = problem.pipeline.stages();
  const int n = problem.num_layers();
  Plan plan;
  plan.option.assign(n, 0);
  for (StageIdx s = 0; s <= stages; ++s) {
    // Spread the remainder over the first stages, as Megatron's uniform split would.
    plan.stage_begin.push_back(s * (n / stages) + std::min(s, n % stages));
  }
  return plan;
}

namespace {

std::string Counted(const std::string& name, int count) {
  return count == 1 ? name : fmt::format("{} x{}", name, count);
}

}  // namespace

std::string DescribeLayerNames(const Problem& problem, LayerIdx begin, LayerIdx end) {
  std::string out;
  for (LayerIdx l = begin; l < end;) {
    LayerIdx run_end = l + 1;
    while (run_end < end && problem.layers[run_end].name == problem.layers[l].name) ++run_end;
    out += (out.empty() ? "" : ", ") + Counted(problem.layers[l].name, run_end - l);
    l = run_end;
  }
  return out;
}

std::string DescribeOptionMix(const Problem& problem, const Plan& plan, StageIdx s) {
  std::vector<std::pair<std::string, int>> counts;
  for (LayerIdx l = plan.begin(s); l < plan.end(s); ++l) {
    const std::string& name = problem.layers[l].options[plan.option[l]].name;
    auto it = std::find_if(counts.begin(), counts.end(), [&](const auto& c) { return c.first == name; });
    if (it == counts.end()) {
      counts.emplace_back(name, 1);
    } else {
      ++it->second;
    }
  }
  std::string out;
  for (const auto& [name, count] : counts) out += (out.empty() ? "" : ", ") + Counted(name, count);
  return out;
}

}  // namespace bmpipe

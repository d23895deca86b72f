#include "bmpipe/problem/layer_roles.h"

#include <algorithm>

namespace bmpipe {

ModelShape ShapeOf(const Problem& problem) {
  const int n = problem.num_layers();
  auto occurrences = [&](const std::string& name) {
    return std::count_if(problem.layers.begin(), problem.layers.end(), [&](const Layer& l) { return l.name == name; });
  };
  ModelShape shape;
  shape.body_end = n;
  if (n >= 3 && occurrences(problem.layers.front().name) == 1) shape.body_begin = 1;
  if (n >= 3 && occurrences(problem.layers.back().name) == 1) shape.body_end = n - 1;
  for (LayerIdx l = shape.body_begin + 1; l < shape.body_end; ++l) {
    if (!SameCosts(problem.layers[shape.body_begin], problem.layers[l])) shape.body_uniform = false;
  }
  return shape;
}

bool MeansRecompute(const LayerOption& option, Recompute recompute) {
  const Result<Recompute> meaning = ParseRecompute(option.name);
  return meaning.ok() && meaning.value() == recompute;
}

OptionIdx FindRecompute(const Layer& layer, Recompute recompute) {
  for (OptionIdx o = 0; o < static_cast<OptionIdx>(layer.options.size()); ++o) {
    if (MeansRecompute(layer.options[o], recompute)) return o;
  }
  return -1;
}

OptionIdx NoneOption(const Layer& layer) {
  OptionIdx best = 0;
  for (OptionIdx o = 0; o < static_cast<OptionIdx>(layer.options.size()); ++o) {
    if (MeansRecompute(layer.options[o], Recompute{})) return o;
    const LayerOption& a = layer.options[o];
    const LayerOption& b = layer.options[best];
    if (a.backward_ns + a.recompute_ns < b.backward_ns + b.recompute_ns) best = o;
  }
  return best;
}

OptionIdx SelectiveOption(const Layer& layer) {
  for (OptionIdx o = 0; o < static_cast<OptionIdx>(layer.options.size()); ++o) {
    if (MeansRecompute(layer.options[o], Recompute{kRecomputeCoreAttention})) return o;
  }
  return -1;
}

OptionIdx FullOption(const Layer& layer) {
  OptionIdx best = 0;
  for (OptionIdx o = 0; o < static_cast<OptionIdx>(layer.options.size()); ++o) {
    if (MeansRecompute(layer.options[o], Recompute{kRecomputeLayer})) return o;
    if (layer.options[o].saved_bytes < layer.options[best].saved_bytes) best = o;
  }
  return best;
}

std::vector<OptionIdx> NoneOptions(const Problem& problem) {
  std::vector<OptionIdx> option;
  for (const Layer& layer : problem.layers) option.push_back(NoneOption(layer));
  return option;
}

Plan PlanWithEnds(const Problem& problem, const std::vector<LayerIdx>& end) {
  Plan plan;
  plan.stage_begin.push_back(0);
  for (LayerIdx e : end) plan.stage_begin.push_back(e);
  plan.option = NoneOptions(problem);
  return plan;
}

std::string StageSizes(const std::vector<LayerIdx>& end) {
  std::string sizes;
  LayerIdx begin = 0;
  for (LayerIdx e : end) {
    sizes += (sizes.empty() ? "" : ", ") + std::to_string(e - begin);
    begin = e;
  }
  return "[" + sizes + "]";
}

}  // namespace bmpipe

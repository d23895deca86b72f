// The roles a framework gives a problem's layers (embedding, decoder layers, head) and the
// options that mean a recomputation setting (recompute.h).
#pragma once

#include <string>
#include <vector>

#include "bmpipe/problem/plan.h"
#include "bmpipe/problem/problem.h"
#include "bmpipe/problem/recompute.h"

namespace bmpipe {

// Frameworks count "layers" as the decoder layers: the first layer is the embedding (pre) and
// the last the head (post) when their names occur once; the rest is the body.
struct ModelShape {
  LayerIdx body_begin = 0;
  LayerIdx body_end = 0;
  bool body_uniform = true;  // every body layer has the same costs and options
  int body() const { return body_end - body_begin; }
};
ModelShape ShapeOf(const Problem& problem);

// Whether the option's name means `recompute` (problem/recompute.h), and the first option of
// `layer` that does (-1 if none).
bool MeansRecompute(const LayerOption& option, Recompute recompute);
OptionIdx FindRecompute(const Layer& layer, Recompute recompute);

// The option of `layer` a framework setting means: none (no recomputation; else the cheapest),
// selective (core attention; -1 if none), full (the whole layer, else the one saving the most
// memory).
OptionIdx NoneOption(const Layer& layer);
OptionIdx SelectiveOption(const Layer& layer);
OptionIdx FullOption(const Layer& layer);

// NoneOption of every layer.
std::vector<OptionIdx> NoneOptions(const Problem& problem);

// A plan with the given stage ends (end[s] = first layer after stage s) and every layer at its
// NoneOption.
Plan PlanWithEnds(const Problem& problem, const std::vector<LayerIdx>& end);

// "[3, 4, 4, 3]": the layers per stage of stage ends `end`.
std::string StageSizes(const std::vector<LayerIdx>& end);

}  // namespace bmpipe

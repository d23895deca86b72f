#include "bmpipe/frameworks/stages.h"

#include <fmt/format.h>

#include "bmpipe/core/text.h"
#include "bmpipe/core/json_cursor.h"
#include "bmpipe/sim/simulator.h"

namespace bmpipe {
namespace {

// Inside ReadDocument: the reader's error.
[[noreturn]] void Fail(const std::string& message) { throw internal::CursorFailure{message}; }

}  // namespace

std::vector<StageLayers> Stages(const Plan& plan, const ModelShape& shape) {
  std::vector<StageLayers> stages(plan.num_stages());
  for (StageIdx s = 0; s < plan.num_stages(); ++s) {
    for (LayerIdx l = plan.begin(s); l < plan.end(s); ++l) {
      if (l < shape.body_begin) stages[s].embedding = true;
      else if (l >= shape.body_end) stages[s].head = true;
      else stages[s].body.push_back(l);
    }
  }
  return stages;
}

std::string OptionName(const Problem& problem, const Plan& plan, LayerIdx l) {
  return problem.layers[l].options[plan.option[l]].name;
}

std::string List(const std::vector<int>& v) { return fmt::format("[{}]", fmt::join(v, ", ")); }

std::string Header(const Problem& problem, const Plan& plan, const std::string& comment) {
  const SimResult sim = SimulatePlan(problem, plan).value();
  return fmt::format("{} bmpipe plan{}: {} ranks x {} chunk{}, {} micro-batches; simulated iteration {}\n", comment,
                     problem.name.empty() ? "" : " for " + problem.name, problem.pipeline.ranks, problem.pipeline.chunks,
                     problem.pipeline.chunks == 1 ? "" : "s", problem.pipeline.micro_batches,
                     FormatDuration(sim.iteration_ns));
}

WholeModelRecompute ClassifyWholeModelRecompute(const Problem& problem, const Plan& plan) {
  const ModelShape shape = ShapeOf(problem);
  bool none = true, full = true;
  for (LayerIdx l = 0; l < problem.num_layers(); ++l) {
    const Layer& layer = problem.layers[l];
    const bool at_none = plan.option[l] == NoneOption(layer);
    if (l < shape.body_begin || l >= shape.body_end) {
      // The frameworks never checkpoint the embedding or the head.
      none = none && at_none;
      full = full && at_none;
      continue;
    }
    none = none && at_none;
    full = full && MeansRecompute(layer.options[plan.option[l]], Recompute{kRecomputeLayer});
  }
  if (none) return WholeModelRecompute::kNone;
  return full && shape.body() > 0 ? WholeModelRecompute::kFull : WholeModelRecompute::kNeither;
}

Result<Plan> FullRecomputePlan(const Problem& problem, const Plan& plan, const std::string& setting) {
  const ModelShape shape = ShapeOf(problem);
  Plan full = plan;
  for (LayerIdx l = 0; l < problem.num_layers(); ++l) {
    const Layer& layer = problem.layers[l];
    if (l < shape.body_begin || l >= shape.body_end) {
      full.option[l] = NoneOption(layer);
      continue;
    }
    full.option[l] = FindRecompute(layer, Recompute{kRecomputeLayer});
    if (full.option[l] < 0) {
      std::vector<std::string> names;
      for (const LayerOption& o : layer.options) names.push_back(o.name);
      return InvalidInput(fmt::format("{} recomputes every decoder layer whole, but layer {} ({}) has no option that "
                                      "does (its options: {}); add a 'full' option to the problem's decoder layers",
                                      setting, l, layer.name, fmt::join(names, ", ")));
    }
  }
  return full;
}

std::string WholeModelRecomputeNote(const Problem& problem, const Plan& plan, const std::string& setting,
                                    const std::string& framework) {
  std::string out = fmt::format("# {} checkpoints every decoder layer or none, and never the embedding or the head;\n"
                                "# the plan's recomputation is neither, so this export uses {}, which recomputes\n"
                                "# every decoder layer whole. What the plan wanted per stage:\n",
                                framework, setting);
  for (StageIdx s = 0; s < plan.num_stages(); ++s) {
    out += fmt::format("#   stage {}: {}\n", s, DescribeOptionMix(problem, plan, s));
  }
  const Result<Plan> full = FullRecomputePlan(problem, plan, setting);
  if (!full.ok()) return out + "# bmpipe cannot simulate " + setting + ": " + full.error().message + "\n";
  const SimResult want = SimulatePlan(problem, plan).value();
  const SimResult have = SimulatePlan(problem, full.value()).value();
  auto fit = [](const SimResult& sim) { return sim.fits ? "fits in memory" : "does NOT fit in memory"; };
  out += fmt::format("# with {} the simulated iteration is {} ({}) instead of the plan's {} ({}), {:+.1f} %\n", setting,
                     FormatDuration(have.iteration_ns), fit(have), FormatDuration(want.iteration_ns), fit(want),
                     100.0 * (static_cast<double>(have.iteration_ns) / static_cast<double>(want.iteration_ns) - 1));
  return out;
}

Plan PlanOfStages(const Problem& problem, const std::vector<StageSpec>& stages, const std::string& what) {
  const ModelShape shape = ShapeOf(problem);
  int decoders = 0;
  for (const StageSpec& s : stages) decoders += s.decoders;
  if (decoders != shape.body()) {
    Fail(fmt::format("{} places {} decoder layers, but the problem has {}", what, decoders, shape.body()));
  }
  Plan plan;
  plan.option = NoneOptions(problem);
  plan.stage_begin.push_back(0);
  LayerIdx at = 0;
  const Pipeline& p = problem.pipeline;
  for (std::size_t s = 0; s < stages.size(); ++s) {
    const LayerIdx begin = at;
    if (stages[s].embedding) at = shape.body_begin;
    at += stages[s].decoders;
    if (stages[s].head) at = problem.num_layers();
    if (at == begin) {
      Fail(fmt::format("{}: stage {} (rank {}, chunk {}) holds no layer of the problem; bmpipe's stages hold at least "
                       "one (move a layer onto it)",
                       what, s, p.RankOf(static_cast<StageIdx>(s)), p.ChunkOf(static_cast<StageIdx>(s))));
    }
    plan.stage_begin.push_back(at);
  }
  return plan;
}

void SetLayerOption(const Problem& problem, Plan& plan, LayerIdx l, Recompute want, const std::string& setting) {
  const Layer& layer = problem.layers[l];
  const OptionIdx o = FindRecompute(layer, want);
  if (o < 0) {
    std::vector<std::string> names;
    for (const LayerOption& option : layer.options) names.push_back(option.name);
    Fail(fmt::format("{} recomputes '{}' on layer {} ({}), which has no option meaning that (its options: {}); add an "
                     "option '{}' to the problem's layers, or change the setting",
                     setting, RecomputeName(want), l, layer.name, fmt::join(names, ", "), RecomputeName(want)));
  }
  plan.option[l] = o;
}

}  // namespace bmpipe

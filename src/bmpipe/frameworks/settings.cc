#include "bmpipe/frameworks/settings.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "bmpipe/sim/simulator.h"
#include "bmpipe/solve/candidates.h"
#include "bmpipe/solve/load_bound.h"

namespace bmpipe {

std::uint16_t OptionMask(const Layer& layer, const std::function<bool(Recompute)>& keep) {
  std::uint16_t mask = 0;
  for (OptionIdx o = 0; o < static_cast<OptionIdx>(layer.options.size()); ++o) {
    const Result<Recompute> meaning = ParseRecompute(layer.options[o].name);
    if (meaning.ok() && keep(meaning.value())) mask |= OnlyOption(o);
  }
  return mask;
}

std::vector<std::uint16_t> BodyFamily(const Problem& problem, const ModelShape& shape,
                                      const std::function<bool(Recompute)>& keep) {
  std::vector<std::uint16_t> family(problem.num_layers());
  for (LayerIdx l = 0; l < problem.num_layers(); ++l) {
    const Layer& layer = problem.layers[l];
    family[l] = l >= shape.body_begin && l < shape.body_end ? OptionMask(layer, keep) : 0;
    if (family[l] == 0) family[l] = OnlyOption(NoneOption(layer));
  }
  return family;
}

std::optional<TargetSetting> UniformSetting(const Problem& problem, const ModelShape& shape, Recompute recompute,
                                            std::string flags) {
  TargetSetting setting{std::move(flags), {}};
  std::vector<std::uint16_t> family(problem.num_layers());
  for (LayerIdx l = 0; l < problem.num_layers(); ++l) {
    const bool body = l >= shape.body_begin && l < shape.body_end;
    const OptionIdx o = body ? FindRecompute(problem.layers[l], recompute) : NoneOption(problem.layers[l]);
    if (o < 0) return std::nullopt;
    family[l] = OnlyOption(o);
  }
  setting.space.families.push_back(std::move(family));
  return setting;
}

Error NoSettingFor(const Target& target) {
  return InvalidInput(fmt::format("target {}: the decoder layers have none of the options its settings need (none, "
                                  "full{}); name the problem's options by what they recompute",
                                  target.name, target.modules != 0 ? ", selective" : ""));
}

Status AnySettings(const Problem&, const Target&, const SettingSink& offer, int) {
  offer(TargetSetting{});
  return {};
}

Status ForEachTargetSetting(const Problem& problem, TargetKind kind, const SettingSink& fn, int max_block) {
  if (Status runs = TargetRunsPipeline(kind, problem.pipeline); !runs.ok()) return runs;
  const Target& target = TargetOf(kind);
  return target.settings(problem, target, fn, max_block);
}

namespace {

// The plan the framework runs for a plan of `space`: Megatron's block rule applied, else the
// target's order of options within a stage (MindFormers'). Costs do not change where the stage's
// layers are identical.
std::optional<Plan> Canonical(const Problem& problem, const Target& target, const StageSpace& space, Plan plan) {
  if (space.block >= 0) {
    space.AssignFixed(plan);
    return plan;
  }
  return target.canonical ? target.canonical(problem, std::move(plan)) : std::optional<Plan>(std::move(plan));
}

}  // namespace

namespace {

// The problem with, on each layer, only the options `space` allows it (every option when it
// restricts none): what a bound over the space's plans sees.
Problem WithAllowedOptions(const Problem& problem, const StageSpace& space) {
  if (space.families.empty()) return problem;
  Problem p = problem;
  for (LayerIdx l = 0; l < p.num_layers(); ++l) {
    unsigned allowed = 0;
    for (const std::vector<std::uint16_t>& family : space.families) allowed |= family[l];
    if (space.block >= 0 && space.block_option[l] >= 0) allowed |= 1u << space.block_option[l];
    std::vector<LayerOption> kept;
    for (OptionIdx o = 0; o < static_cast<OptionIdx>(problem.layers[l].options.size()); ++o) {
      if (allowed >> o & 1u) kept.push_back(problem.layers[l].options[o]);
    }
    if (!kept.empty()) p.layers[l].options = std::move(kept);
  }
  return p;
}

// Work every stage but the first and the last carries beyond its layers' cheapest allowed
// options, per micro-batch (RankLoadBound's stage_extra_ns): under a block setting whose block
// option every decoder layer has, such a stage holds a decoder layer (only the embedding or the
// head may stand alone) and its first one takes the block option.
TimeNs BlockStageExtra(const Problem& problem, const StageSpace& space) {
  if (space.block < 1) return 0;
  const ModelShape shape = ShapeOf(problem);
  TimeNs extra = -1;
  for (LayerIdx l = shape.body_begin; l < shape.body_end; ++l) {
    if (space.block_option[l] < 0) return 0;
    const std::vector<LayerOption>& options = problem.layers[l].options;
    TimeNs least = OptionWork(problem.pipeline, options[space.block_option[l]]);
    for (const std::vector<std::uint16_t>& family : space.families) {
      for (OptionIdx o = 0; o < static_cast<OptionIdx>(options.size()); ++o) {
        if (family[l] >> o & 1u) least = std::min(least, OptionWork(problem.pipeline, options[o]));
      }
    }
    const TimeNs e = OptionWork(problem.pipeline, options[space.block_option[l]]) - least;
    extra = extra < 0 ? e : std::min(extra, e);
  }
  return std::max<TimeNs>(0, extra);
}

}  // namespace

TimeNs SpaceFloor(const Problem& problem, const StageSpace& space, const Schedule& schedule) {
  return RankLoadBound(WithAllowedOptions(problem, space), schedule, BlockStageExtra(problem, space));
}

Result<TargetPlan> PlanForTarget(const Problem& problem, TargetKind kind, const PlannerOptions& options) {
  const auto began = std::chrono::steady_clock::now();
  const Target& target = TargetOf(kind);
  TargetPlan out;
  out.target = kind;
  PlannerOptions each = options;
  const Deadline own = Deadline::In(options.time_limit_s);
  if (each.time_limit_name.empty()) each.time_limit_name = fmt::format("time limit {:g} s", options.time_limit_s);
  double bound = std::numeric_limits<double>::infinity();
  bool any_plan = false, all_infeasible = true;
  PlannerResult best;
  std::optional<Error> error;
  // Block settings beyond the most decoder layers a stage can hold in memory are full recomputation.
  const int max_block = MostDecodersThatFit(problem);
  // Each setting gets an equal share of the time limit left, so that a hard one does not starve
  // the rest. The caller's deadline (a search's budget, Ctrl-C) only stops the run: a share of it
  // would make what each setting finds depend on the time its run started (the search's limits
  // are in work, for the same answer on any number of threads).
  int total = 0;
  Status counted = ForEachTargetSetting(problem, kind, [&](const TargetSetting&) { return ++total, true; }, max_block);
  if (!counted.ok()) return counted.error();
  std::optional<Schedule> schedule;  // built when a floor is first needed
  // Block settings: a stage of a plan faster than `t` holds at most (t - 1) / w decoder layers,
  // w = micro-batches per copy x the least work of one (its rank runs them all). Every block
  // setting of at least that many layers recomputes all the decoder layers of such a plan: they
  // share their plans faster than `t`, and the first one walked stands for the larger ones.
  const ModelShape shape = ShapeOf(problem);
  TimeNs decoder_work = 0;
  for (LayerIdx l = shape.body_begin; l < shape.body_end; ++l) {
    const TimeNs w = LeastLayerWork(problem, l) * MicroBatchesPerCopy(problem.pipeline);
    decoder_work = l == shape.body_begin ? w : std::min(decoder_work, w);
  }
  auto most_decoders_faster_than = [&](TimeNs t) {
    return decoder_work > 0 ? static_cast<int>((t - 1) / decoder_work) : std::numeric_limits<int>::max();
  };
  int covering_block = -1;  // the block setting that stands for every larger one
  Status walked = ForEachTargetSetting(problem, kind, [&](const TargetSetting& setting) {
    each.time_limit_s = own.SecondsLeft() / std::max(1, total - out.settings);
    if (out.settings > 0 && (own.Expired() || options.deadline.Expired())) {
      // Settings not planned: nothing is proven about them.
      bound = 0;
      all_infeasible = false;
      if (best.stopped_by.empty()) best.stopped_by = "the time limit (before every recomputation setting was planned)";
      return false;
    }
    if (any_plan && setting.space.block >= 0) {
      if (covering_block >= 0 && setting.space.block > covering_block) {
        // Its plans faster than the best so far are the covering block setting's, planned (its
        // bound counted) or bounded by its floor.
        ++out.settings;
        return true;
      }
      if (setting.space.block >= most_decoders_faster_than(best.iteration_ns)) covering_block = setting.space.block;
    }
    // A setting whose floor, the rank-load bound (load_bound.h) of the problem with only the
    // options it allows, is no faster than the best plan so far cannot beat it: not planned, its
    // floor bounds it.
    if (any_plan && total > 1) {
      if (!schedule) schedule.emplace(problem.pipeline);
      const TimeNs floor = SpaceFloor(problem, setting.space, *schedule);
      if (floor >= best.iteration_ns) {
        ++out.settings;
        all_infeasible = false;
        bound = std::min(bound, static_cast<double>(floor));
        return true;
      }
    }
    each.space = setting.space;
    if (options.progress && total > 1) {
      // The phase names the setting; the best plan is the best over settings so far.
      each.progress = [&, n = out.settings + 1](const Progress& p) {
        Progress q = p;
        q.phase = fmt::format("setting {} of {}: {}", n, total, p.phase);
        if (any_plan) q.best_s = q.best_s < 0 ? ToSeconds(best.iteration_ns) : std::min(q.best_s, ToSeconds(best.iteration_ns));
        q.bound_s = -1;  // a bound over this setting only
        options.progress(q);
      };
    }
    Result<PlannerResult> r = PlanPipeline(problem, each);
    if (!r.ok()) {
      error = r.error();
      return false;
    }
    PlannerResult& p = r.value();
    ++out.settings;
    best.nodes += p.nodes;
    best.lp_solves += p.lp_solves;
    best.cuts += p.cuts;
    best.candidates += p.candidates;
    if (p.status == ModelStatus::kInfeasible) return true;
    all_infeasible = false;
    bound = std::min(bound, p.bound_ns);
    if (!p.stopped_by.empty() && best.stopped_by.empty()) best.stopped_by = p.stopped_by;
    if (p.status == ModelStatus::kNoSolution) return true;
    const std::optional<Plan> canonical = Canonical(problem, target, setting.space, p.plan);
    // The planner's plan is simulated and fits; another order of its layers is simulated here.
    SimResult sim;
    if (canonical && *canonical == p.plan) {
      sim.iteration_ns = p.iteration_ns;
    } else if (canonical) {
      sim = SimulatePlan(problem, *canonical).value();
    }
    if (!canonical || !sim.fits) {
      // The framework's order on stages of unlike layers runs another plan, which does not fit:
      // nothing found for this setting (the bound still holds).
      if (best.stopped_by.empty()) best.stopped_by = "the framework's layer order within mixed stages";
      return true;
    }
    if (sim.iteration_ns != p.iteration_ns && best.stopped_by.empty()) {
      best.stopped_by = "the framework's layer order within mixed stages (the plan is what it runs, not proven optimal)";
    }
    const TimeNs time = sim.iteration_ns;
    if (!any_plan || time < best.iteration_ns) {
      any_plan = true;
      best.plan = *canonical;
      best.iteration_ns = time;
      best.objective_ns = p.objective_ns;
      best.solver = p.solver;
      best.lp_text = p.lp_text;
      out.setting = setting.flags;
    }
    return true;
  }, max_block);
  if (!walked.ok()) return walked.error();
  if (error) return *error;
  if (all_infeasible) {
    best.status = ModelStatus::kInfeasible;
  } else if (!any_plan) {
    best.status = ModelStatus::kNoSolution;
    best.bound_ns = std::isfinite(bound) ? bound : 0;
  } else {
    best.bound_ns = std::min(bound, static_cast<double>(best.iteration_ns));
    best.gap = (static_cast<double>(best.iteration_ns) - best.bound_ns) / static_cast<double>(best.iteration_ns);
    best.status = best.gap < kOptimalityTolerance ? ModelStatus::kOptimal : ModelStatus::kFeasible;
    if (best.status == ModelStatus::kOptimal) best.stopped_by.clear();
  }
  best.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  out.planner = std::move(best);
  return out;
}

bool TargetRunsPlan(const Problem& problem, const Plan& plan, TargetKind kind) {
  bool runs = false;
  const Status walked = ForEachTargetSetting(
      problem, kind,
      [&](const TargetSetting& setting) {
        runs = setting.space.Contains(plan);
        return !runs;
      },
      MostDecoderLayers(problem, plan));
  return walked.ok() && runs;
}

int MostDecodersThatFit(const Problem& problem) {
  const ModelShape shape = ShapeOf(problem);
  std::vector<Bytes> statics;
  for (LayerIdx l = shape.body_begin; l < shape.body_end; ++l) statics.push_back(problem.layers[l].static_bytes);
  std::sort(statics.begin(), statics.end());
  Bytes used = problem.reserved_bytes;
  int k = 0;
  while (k < static_cast<int>(statics.size()) && used + statics[k] <= problem.memory_bytes) used += statics[k++];
  return k;
}

int MostDecoderLayers(const Problem& problem, const Plan& plan) {
  const ModelShape shape = ShapeOf(problem);
  int most = 0;
  for (StageIdx s = 0; s < plan.num_stages(); ++s) {
    most = std::max(most, std::min(plan.end(s), shape.body_end) - std::max(plan.begin(s), shape.body_begin));
  }
  return most;
}

}  // namespace bmpipe

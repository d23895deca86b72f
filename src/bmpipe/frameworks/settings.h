// Planning within a target's space: its recomputation settings (each framework's SettingsFn), the
// exact planner run on every setting under one time limit, and whether a target runs a plan.
// Also the pieces the frameworks' settings are built from.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "bmpipe/core/error.h"
#include "bmpipe/frameworks/framework.h"
#include "bmpipe/problem/layer_roles.h"
#include "bmpipe/problem/problem.h"
#include "bmpipe/solve/planner.h"

namespace bmpipe {

// Calls `fn` on each setting the target can run on `problem` in turn (one for per-layer and
// per-stage targets), until it returns false; block settings beyond `max_block` decoder layers are
// left out. The setting passed is valid only during the call. An error when the target cannot run
// the problem's pipeline at all (TargetRunsPipeline) or has no setting for its options.
Status ForEachTargetSetting(const Problem& problem, TargetKind kind, const SettingSink& fn, int max_block = kMaxLayers);

// The most decoder layers a stage of `plan` holds: block settings beyond it equal full recomputation.
int MostDecoderLayers(const Problem& problem, const Plan& plan);
// The most decoder layers any stage can hold within device memory (their static bytes alone).
int MostDecodersThatFit(const Problem& problem);

struct TargetPlan {
  TargetKind target = TargetKind::kAny;
  PlannerResult planner;  // the best plan over the settings; its bound holds over all of them
  std::string setting;    // the setting of the plan (global targets), in the framework's terms
  int settings = 0;       // settings planned
};

// Plans `problem` within the target's space: every setting planned exactly, under one time limit
// (options.time_limit_s and options.deadline bound all of them together).
Result<TargetPlan> PlanForTarget(const Problem& problem, TargetKind kind, const PlannerOptions& options);

// A lower bound on the iteration time of every plan in `space`: the rank-load bound
// (solve/load_bound.h) of the problem with only the options the space allows, where under a
// block setting every stage but the first and the last recomputes its first decoder layer.
TimeNs SpaceFloor(const Problem& problem, const StageSpace& space, const Schedule& schedule);

// Whether the target runs `plan` as planned: its pipeline, and one of its settings' spaces.
bool TargetRunsPlan(const Problem& problem, const Plan& plan, TargetKind kind);

// ---------------------------------------------------------------------------------------------
// For the frameworks' settings.

// The options of `layer` whose meaning `keep` accepts, as a mask (bit o: option o).
std::uint16_t OptionMask(const Layer& layer, const std::function<bool(Recompute)>& keep);
inline std::uint16_t OnlyOption(OptionIdx o) { return static_cast<std::uint16_t>(1u << o); }

// A family in which the decoder layers take the options `keep` accepts, the others (and decoder
// layers without such an option) their NoneOption.
std::vector<std::uint16_t> BodyFamily(const Problem& problem, const ModelShape& shape,
                                      const std::function<bool(Recompute)>& keep);

// A global setting: every decoder layer takes the option meaning `recompute`, the others their
// NoneOption; nullopt when some decoder layer has none.
std::optional<TargetSetting> UniformSetting(const Problem& problem, const ModelShape& shape, Recompute recompute,
                                            std::string flags);

// The error of a global target none of whose settings the decoder layers' options express.
Error NoSettingFor(const Target& target);

// The per-layer space of `any`: every option on every layer.
Status AnySettings(const Problem& problem, const Target& target, const SettingSink& offer, int max_block);

}  // namespace bmpipe

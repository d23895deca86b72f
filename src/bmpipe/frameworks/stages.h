// What the frameworks' exports and readers share: a plan's stages in a framework's terms and back,
// the header line every export starts with, and the one-setting-for-the-whole-model recomputation
// that DeepSpeed and torchtitan take.
#pragma once

#include <string>
#include <vector>

#include "bmpipe/core/error.h"
#include "bmpipe/problem/layer_roles.h"
#include "bmpipe/problem/plan.h"
#include "bmpipe/problem/problem.h"

namespace bmpipe {

// A stage as a framework sees it: whether it holds the embedding and the head, and its decoder
// layers (problem indices).
struct StageLayers {
  bool embedding = false, head = false;
  std::vector<LayerIdx> body;
};
std::vector<StageLayers> Stages(const Plan& plan, const ModelShape& shape);

std::string OptionName(const Problem& problem, const Plan& plan, LayerIdx l);

// "[1, 2, 3]".
std::string List(const std::vector<int>& v);

// "<comment> bmpipe plan for NAME: P ranks x V chunks, M micro-batches; simulated iteration T".
std::string Header(const Problem& problem, const Plan& plan, const std::string& comment);

// A framework that checkpoints every decoder layer or none (DeepSpeed's interval 0 or 1,
// torchtitan's mode none or full) and never the embedding or the head: which of the two a plan
// is, or neither.
enum class WholeModelRecompute { kNone, kFull, kNeither };
WholeModelRecompute ClassifyWholeModelRecompute(const Problem& problem, const Plan& plan);

// The plan with every decoder layer at the option that recomputes the whole layer (recompute.h)
// and the embedding and head at NoneOption; an error naming the first decoder layer without such
// an option. `setting` names the framework's setting in that message.
Result<Plan> FullRecomputePlan(const Problem& problem, const Plan& plan, const std::string& setting);

// The comment lines an export writes when it cannot express the plan's recomputation and uses
// `setting` instead: why, what the plan wanted per stage, and the simulated iteration and memory
// fit of `setting` next to the plan's (or why it cannot be simulated).
std::string WholeModelRecomputeNote(const Problem& problem, const Plan& plan, const std::string& setting,
                                    const std::string& framework);

// A stage as a launcher's configuration states it: whether it holds the embedding and the head,
// and how many decoder layers.
struct StageSpec {
  bool embedding = false, head = false;
  int decoders = 0;
};

// The plan of `stages` (chunk-major) with every layer at NoneOption. Fails (through the cursor:
// inside ReadDocument) when a stage would hold no layer of the problem, or the decoder layers do
// not add up; `what` names the configuration.
Plan PlanOfStages(const Problem& problem, const std::vector<StageSpec>& stages, const std::string& what);

// Sets layer `l` of `plan` to its option whose meaning is `want`; fails (through the cursor) naming
// `setting` when the layer has none.
void SetLayerOption(const Problem& problem, Plan& plan, LayerIdx l, Recompute want, const std::string& setting);

}  // namespace bmpipe

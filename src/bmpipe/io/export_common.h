// What the exporters share (export.cc, export_deepspeed.cc, export_torchtitan.cc): a plan's stages
// in a framework's terms, the header line every export starts with, and the one-setting-for-the-
// whole-model recomputation that DeepSpeed and torchtitan take. Internal to bmpipe/io.
#pragma once

#include <string>
#include <vector>

#include "bmpipe/baselines/common.h"
#include "bmpipe/core/error.h"
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

// The exporters in their own files.
Result<std::string> ExportDeepSpeed(const Problem& problem, const Plan& plan);
Result<std::string> ExportTorchTitan(const Problem& problem, const Plan& plan);

}  // namespace bmpipe

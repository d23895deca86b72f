// Megatron-LM (Megatron-Core), bmpipe's targets megatron (the Transformer Engine layer spec) and
// megatron-local (the local spec): what it runs (framework.h's rows), its recomputation settings,
// its rules between training features, the argument file bmpipe writes for it and reads back, and
// the plan its flags give a configuration by default.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "bmpipe/core/error.h"
#include "bmpipe/frameworks/framework.h"
#include "bmpipe/problem/plan.h"
#include "bmpipe/problem/problem.h"

namespace bmpipe {

// One global setting: none; selective with every set of the spec's --recompute-modules; full
// uniform; full block N (the first N decoder layers of every chunk).
Status MegatronSettings(const Problem& problem, const Target& target, const SettingSink& offer, int max_block);
// What megatron-core asserts between the features it runs (docs/targets.md, "Training setups").
Status MegatronRules(const Target& target, const TrainingInfo& training, const Pipeline* pipeline);

// A file of Megatron-LM arguments, one per line: the training run's parallel sizes, batch,
// sequence parallelism, optimizer sharding and overlap (from the problem's `training`),
// --pipeline-model-parallel-layout (chunk-major, E / t / L; none for a single stage) and the
// recomputation setting of the target that is exactly the plan's; when the plan is not one
// Megatron runs, the best setting on its partition, what that costs, and the plan's per-layer
// list for a patched Megatron. `target` picks the layer spec (megatron-local: the local one).
Result<std::string> ExportMegatron(const Problem& problem, const Plan& plan, TargetKind target);

// Megatron-LM arguments, one or more per line or one command line, '#' comments, shell quoting.
// The stages come from --pipeline-model-parallel-layout, or from
// --decoder-first/last-pipeline-num-layers, --account-for-embedding/loss-in-pipeline-split and
// the even split, with the virtual stages of --num-virtual-stages-per-pipeline-rank or
// --num-layers-per-virtual-pipeline-stage; recomputation from --recompute-granularity,
// --recompute-method, --recompute-num-layers and --recompute-modules. The parallel and batch
// flags are checked against the problem's `training` section. Flags that do not describe the
// plan (--hidden-size, --lr, the launcher's own...) are not read; the notes list them.
Result<Plan> ReadMegatron(const std::string& text, const Problem& problem, const std::string& source,
                          std::vector<std::string>& notes);
// The training setup a Megatron-LM argument file (or command line) states: parallel sizes, virtual
// stages, batch, sequence parallelism, attention backend, ZeRO, recomputation, precision and FP8
// weights, state dtypes, overlap switches, optimizer offload, and the MoE dispatcher, routing,
// capacity, overlap and CUDA graphs; a flag left out at Megatron's default (bf16 gradients only with
// --grad-reduce-in-bf16 or the precision-aware optimizer's --main-grads-dtype bf16, the attention
// backend auto). Contradictions and what bmpipe does not cost are errors naming the flag and the fix.
Result<LauncherSetup> ReadMegatronSetup(const std::string& text, const std::string& source);

// A Megatron-Bridge (or NeMo 2) ConfigContainer as its YAML dump writes it (`_target_:
// ...ConfigContainer`, or `model`, `train` and `ddp` or `optimizer` sections), and its training
// setup: each field that changes cost said as the Megatron-LM flag Megatron-Bridge sets from it
// (a comm_overlap value over the ddp one, the mixed_precision section over the model's fields),
// then read by ReadMegatronSetup.
bool IsMegatronBridgeConfig(const Json& doc);
Result<LauncherSetup> ReadMegatronBridgeSetup(const Json& doc, const std::string& source);

// Lines of flags ("--num-layers 32"), or a command line with --pipeline-model-parallel-size or
// --num-layers.
Result<bool> DetectMegatron(const PlanText& text);

// The flags of a Megatron export (ExportMegatron's text) on one line, as a launcher's command line
// takes them: the comments left out.
std::string MegatronCommandLine(const std::string& exported);

// Megatron's --pipeline-model-parallel-layout of a plan: per stage (chunk-major) E for the
// embedding, t*k for k decoder layers, L for the loss and head, separated by '|'.
std::string MegatronLayout(const Problem& problem, const Plan& plan);

// Megatron-LM's plan for one configuration as a user launches it, rather than its best over flags:
// the decoder layers split by the first rule that divides them (equal layers per stage; else the
// embedding counted as a layer, then the loss, then both; else, without
// interleaving, uneven first and last stages with the fewest layers on the fullest stage), and the
// global recomputation setting on every decoder layer. `flags` names the Megatron flags. Full
// recomputation is method uniform with --recompute-num-layers 1 (every layer keeps its input), or
// with `block_layers` > 0 method block: the first `block_layers` decoder layers of every chunk.
enum class GlobalRecompute { kNone, kSelective, kFull };
struct MegatronLaunch {
  Plan plan;
  std::string flags;
};
Result<MegatronLaunch> MegatronDefaultPlan(const Problem& problem, GlobalRecompute recompute, int block_layers = 0);
// "none", "selective" or "full"; nullopt for anything else.
std::optional<GlobalRecompute> ParseGlobalRecompute(const std::string& name);

}  // namespace bmpipe

// The frameworks that run plans, each described by what it executes unmodified (docs/targets.md),
// and the planner that solves exactly within that space: a plan for a target is always one the
// target runs as planned.
//
//  target          recomputation                                   partition          interleaving
//  any             any option on any layer (needs framework        any                yes
//                  support for per-layer recomputation)
//  torch           any option with a known meaning, per layer      any                yes
//                  (the model's own checkpointing code)
//  megatron        one global setting: none; selective with a set  any (layout flag)  yes
//                  of --recompute-modules the Transformer Engine
//                  spec honours (core_attn, mlp: its norms are
//                  fused into the linear layers); full uniform; full
//                  block N (first N decoder layers of every chunk)
//  megatron-local  as megatron, with layernorm among the modules   any (layout flag)  yes
//  mindformers     per-stage counts from each stage's first layer  at least one       yes
//                  of full, select+comm, and then select or comm   decoder per stage
//  deepspeed       none or full, per layer (a PipelineModule        any (parts)        no
//                  subclass sets parts and the checkpointed layers)
//  torchtitan      activation_checkpoint mode none or full         any (FQNs)         yes
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "bmpipe/core/error.h"
#include "bmpipe/problem/problem.h"
#include "bmpipe/solve/planner.h"

namespace bmpipe {

enum class TargetKind { kAny, kTorch, kMegatron, kMegatronLocal, kMindFormers, kDeepSpeed, kTorchTitan };

enum class RecomputeGranularity {
  kPerLayer,  // any allowed option on any layer
  kPerStage,  // per-stage counts of each kind, counted from the stage's first layer (MindFormers)
  kGlobal,    // one setting on every stage
};

struct Target {
  TargetKind kind;
  std::string_view name;       // "megatron"
  std::string_view framework;  // what runs it, with the minimum version
  RecomputeGranularity granularity;
  unsigned modules;            // RecomputePart bits it recomputes selectively (alone or together); global only
  bool block;                  // full recomputation of the first N decoder layers of every chunk; global only
  bool interleaving;
  bool gpipe;
  bool stage_without_decoder;  // a stage may hold only the embedding or the head
  std::string_view cannot;     // what it cannot express, for the report
};

// Every target, in the order --help lists them.
// Why no export and no target but 'any' takes a pipeline with two copies of every stage (DualPipe).
inline constexpr std::string_view kNoFrameworkRunsDualPipe =
    "schedule 'dualpipe' keeps two copies of every stage, which none of the frameworks bmpipe exports to runs "
    "(torch.distributed.pipelining places each stage on one rank); DeepSeek's DualPipe library (dualpipe.DualPipe) "
    "runs it from code: rank r passes the modules of the stages whose rank or mirror_rank in the plan is r, the "
    "lower stage first. Plan with --target any for it, or use schedule 'dualpipev', which torch and torchtitan run";

const std::vector<Target>& AllTargets();
const Target& TargetOf(TargetKind kind);
Result<TargetKind> ParseTarget(const std::string& name);
std::vector<std::string> TargetNames();

// The recomputation options the cost model adds to its default ones for a target's settings:
// megatron selective+mlp; megatron-local its unions with norm; mindformers mlp_act (select) and
// mlp_act+norm (both).
std::vector<std::string> TargetRecomputeOptions(TargetKind kind);
// Adds the options of TargetRecomputeOptions for each of `targets` to `options`, unless there (the
// default recomputation options of a setup planned for those targets).
void AddTargetRecomputeOptions(const std::vector<TargetKind>& targets, std::vector<std::string>& options);

// Whether the target's framework runs the training setup a problem states (its `training`
// section): an InvalidInput error naming the setup field, its value, why the framework cannot run
// it and the fix, else ok. `any` and `torch` run every setup. Pure and cheap (no planning): the
// search may call it to skip setups. docs/targets.md, "Training setups", lists what each target runs.
// With `pipeline`, also the rules that depend on it (Megatron's MoE all-to-all overlap needs
// interleaving when there is more than one pipeline rank).
Status TargetRunsSetup(TargetKind kind, const TrainingInfo& training, const Pipeline* pipeline = nullptr);

// One recomputation setting of a target and the stage space it allows.
struct TargetSetting {
  std::string flags;  // in the framework's terms ("--recompute-granularity selective --recompute-modules core_attn")
  StageSpace space;
};

// Calls `fn` on each setting the target can run on `problem` in turn (one for per-layer and
// per-stage targets), until it returns false; block settings beyond `max_block` decoder layers are
// left out. The setting passed is valid only during the call. An error when the target cannot run
// the problem's pipeline at all (e.g. DeepSpeed and interleaving) or has no setting for its options.
Status ForEachTargetSetting(const Problem& problem, TargetKind kind, const std::function<bool(const TargetSetting&)>& fn,
                            int max_block = kMaxLayers);

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

// Whether the target runs `plan` as planned: its pipeline, and one of its settings' spaces.
bool TargetRunsPlan(const Problem& problem, const Plan& plan, TargetKind kind);

// Megatron's --pipeline-model-parallel-layout of a plan: per stage (chunk-major) E for the
// embedding, t*k for k decoder layers, L for the loss and head, separated by '|'.
std::string MegatronLayout(const Problem& problem, const Plan& plan);

}  // namespace bmpipe

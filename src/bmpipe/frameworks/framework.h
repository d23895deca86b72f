// The frameworks that run plans (docs/targets.md), as two tables:
//  - one row per framework (Frameworks()): the format bmpipe writes for it (--export, export --to)
//    and reads back (simulate --plan, --plan-format), and how its files are told apart;
//  - one row per target (Targets()): a framework's way of running a plan, described by what it
//    executes unmodified: its recomputation settings (a stage space the planner solves in), and
//    allow-lists of the schedules and the training setups it runs.
// Every name list, --help text and refusal derives from these rows; each framework's own code
// (its settings, rules, export and reader) lives in its folder (megatron/, mindformers/, ...).
// A schedule or setup feature a target does not list is refused, with what does run it.
//
//  target          recomputation                                   partition          schedules
//  any             any option on any layer (needs framework        any                all
//                  support for per-layer recomputation)
//  torch           any option with a known meaning, per layer      any                all but DualPipe
//                  (the model's own checkpointing code)
//  megatron        one global setting: none; selective with a set  any (layout flag)  1F1B, interleaved
//                  of --recompute-modules the Transformer Engine
//                  spec honours (core_attn, mlp: its norms are
//                  fused into the linear layers); full uniform; full
//                  block N (first N decoder layers of every chunk)
//  megatron-local  as megatron, with layernorm among the modules   any (layout flag)  1F1B, interleaved
//  mindformers     per-stage counts from each stage's first layer  at least one       1F1B, interleaved
//                  of full, select+comm, and then select or comm   decoder per stage
//  deepspeed       none or full, per layer (a PipelineModule        any (parts)        1F1B
//                  subclass sets parts and the checkpointed layers)
//  torchtitan      activation_checkpoint mode none or full         any (FQNs)         torch's classes
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "bmpipe/core/document.h"
#include "bmpipe/core/error.h"
#include "bmpipe/problem/plan.h"
#include "bmpipe/problem/problem.h"
#include "bmpipe/solve/candidates.h"

namespace bmpipe {

enum class TargetKind { kAny, kTorch, kMegatron, kMegatronLocal, kMindFormers, kDeepSpeed, kTorchTitan };
enum class FrameworkId { kMegatron, kMindFormers, kDeepSpeed, kTorchTitan, kTorch };

enum class RecomputeGranularity {
  kPerLayer,  // any allowed option on any layer
  kPerStage,  // per-stage counts of each kind, counted from the stage's first layer (MindFormers)
  kGlobal,    // one setting on every stage
};

// What a training setup uses beyond data, tensor and pipeline parallelism, the batch, sequence
// parallelism, the distributed optimizer and fused attention (which every framework runs): the
// words of the targets' setup allow-lists. SetupFeatureInfo() describes each.
enum class SetupFeature : std::uint8_t {
  kContextParallel,     // training.context_parallel > 1
  kExpertParallel,      // training.expert_parallel > 1
  kShardedGradients,    // ZeRO stage 2 or 3 (gradients, and with 3 parameters, sharded)
  kFp8,                 // training.precision fp8, mxfp8 or nvfp4 (quantized GEMMs)
  kFp8Params,           // FP8 weights
  kNoFp8TransposeCache, // FP8 transposes remade every backward
  kBf16Grads,           // training.grad_dtype bf16
  kBf16Moments,         // training.optimizer_dtype bf16
  kTpCommOverlap,       // tensor-parallel collectives overlapped with GEMMs
  kOffloadOptimizer,    // optimizer state and step on the host
  kOffloadKeepsMaster,  // only Adam's moments on the host
  kMoe,                 // mixture-of-experts layers
  kMoeFlexDispatcher,   // the flex (DeepEP) dispatcher
  kMoeCapacity,         // a capacity factor (tokens dropped)
  kMoeCommOverlap,      // the MoE all-to-alls overlapped with another micro-batch's compute
  kMoeCudaGraphs,       // the router and the dispatch preprocessing as CUDA graphs
  kLinearMixers,        // Mamba-2 or Gated DeltaNet layers (a hybrid stack)
};
inline constexpr int kSetupFeatures = 17;
using SetupFeatures = std::uint32_t;  // a set: bit f for SetupFeature f
inline constexpr SetupFeatures kEverySetupFeature = (SetupFeatures{1} << kSetupFeatures) - 1;
constexpr SetupFeatures FeatureBit(SetupFeature f) { return SetupFeatures{1} << static_cast<int>(f); }

struct SetupFeatureInfo {
  SetupFeature feature;
  std::string_view key;   // the problem file's key, e.g. "training.context_parallel"
  std::string_view what;  // e.g. "context parallelism"
};
const SetupFeatureInfo& InfoOf(SetupFeature feature);
// The features `training` uses.
SetupFeatures FeaturesOf(const TrainingInfo& training);
// The value a message shows for `feature` of `training` ("2", "fp8", "true").
std::string FeatureValue(const TrainingInfo& training, SetupFeature feature);

// A set of schedules: bit k for ScheduleKind k.
using ScheduleSet = std::uint32_t;
constexpr ScheduleSet ScheduleBit(ScheduleKind kind) { return ScheduleSet{1} << static_cast<int>(kind); }
inline constexpr ScheduleSet kEverySchedule = ~ScheduleSet{0};

// Why a target does not run a setup feature, and the fix: a message in which "{}" stands for the
// feature's value (FeatureValue).
struct Refusal {
  SetupFeature feature;
  std::string_view why;
};

// One recomputation setting of a target and the stage space it allows.
struct TargetSetting {
  std::string flags;  // in the framework's terms ("--recompute-granularity selective --recompute-modules core_attn")
  StageSpace space;
};
using SettingSink = std::function<bool(const TargetSetting&)>;  // false: stop

struct Target;
// The settings a target offers on a problem whose pipeline it runs (settings.h calls it).
using SettingsFn = Status (*)(const Problem& problem, const Target& target, const SettingSink& offer, int max_block);
// The plan the framework runs for a plan of the setting's space (its order of options within a
// stage), or nullopt when that plan lacks an option its order asks for. Null: the plan itself.
using CanonicalFn = std::optional<Plan> (*)(const Problem& problem, Plan plan);
// The framework's rules between the setup features it runs (Megatron's "tp_comm_overlap needs
// sequence parallelism"); `pipeline` may be null.
using SetupRulesFn = Status (*)(const Target& target, const TrainingInfo& training, const Pipeline* pipeline);

struct Target {
  TargetKind kind;
  std::string_view name;       // "megatron"
  std::string_view framework;  // what runs it, with the minimum version
  std::optional<FrameworkId> runs_on;  // the framework whose export carries its plans (none: any)
  RecomputeGranularity granularity;
  unsigned modules;            // RecomputePart bits it recomputes selectively (alone or together); global only
  bool block;                  // full recomputation of the first N decoder layers of every chunk; global only
  bool stage_without_decoder;  // a stage may hold only the embedding or the head
  ScheduleSet schedules;       // allow-list: the schedules it runs
  SetupFeatures setups;        // allow-list: the setup features it runs (a new feature: none lists it)
  std::vector<Refusal> refusals;  // why it does not run the features it does not list, in the order checked
  std::vector<std::string_view> recompute_options;  // options the cost model adds for its settings
  SettingsFn settings;
  CanonicalFn canonical = nullptr;
  SetupRulesFn rules = nullptr;

  bool Runs(ScheduleKind schedule) const { return (schedules & ScheduleBit(schedule)) != 0; }
  // Whether it runs a schedule of more than one chunk per rank.
  bool Interleaves() const;
};

// Why no export and no target but 'any' takes a pipeline with two copies of every stage (DualPipe).
inline constexpr std::string_view kNoFrameworkRunsDualPipe =
    "schedule 'dualpipe' keeps two copies of every stage, which none of the frameworks bmpipe exports to runs "
    "(torch.distributed.pipelining places each stage on one rank); DeepSeek's DualPipe library (dualpipe.DualPipe) "
    "runs it from code: rank r passes the modules of the stages whose rank or mirror_rank in the plan is r, the "
    "lower stage first. Plan with --target any for it, or use schedule 'dualpipev', which torch and torchtitan run";

// Every target, in the order --help lists them.
const std::vector<Target>& Targets();
const Target& TargetOf(TargetKind kind);
Result<TargetKind> ParseTarget(const std::string& name);
std::vector<std::string> TargetNames();
// The --target help: the sentence `lead`, then one line per target with its framework.
std::string TargetHelp(const std::string& lead);

// Whether the target runs the pipeline's schedule: an InvalidInput error naming the schedule,
// what the target runs, and the targets that do run it, else ok.
Status TargetRunsPipeline(TargetKind kind, const Pipeline& pipeline);

// Whether the target's framework runs the training setup a problem states (its `training`
// section): an InvalidInput error naming the setup field, its value, why the framework cannot run
// it and the fix, else ok. `any` and `torch` run every setup. Pure and cheap (no planning): the
// search may call it to skip setups. docs/targets.md, "Training setups", lists what each target runs.
// With `pipeline`, also the rules that depend on it (Megatron's MoE all-to-all overlap needs
// interleaving when there is more than one pipeline rank).
Status TargetRunsSetup(TargetKind kind, const TrainingInfo& training, const Pipeline* pipeline = nullptr);

// The recomputation options the cost model adds to its default ones for a target's settings:
// megatron selective+mlp; megatron-local its unions with norm; mindformers mlp_act (select) and
// mlp_act+norm (both).
std::vector<std::string> TargetRecomputeOptions(TargetKind kind);
// Adds the options of TargetRecomputeOptions for each of `targets` to `options`, unless there (the
// default recomputation options of a setup planned for those targets).
void AddTargetRecomputeOptions(const std::vector<TargetKind>& targets, std::vector<std::string>& options);

// ---------------------------------------------------------------------------------------------
// Frameworks: what bmpipe writes for each and reads back.

// A plan file's text, split for the frameworks' detectors: the lines that are not blank or
// comments, trimmed on the left.
struct PlanText {
  const std::string& text;
  std::vector<std::string> code;
};

// Writes the plan for the framework; `target` picks among its targets (megatron-local: Megatron's
// local spec).
using ExportFn = Result<std::string> (*)(const Problem& problem, const Plan& plan, TargetKind target);
// Reads the plan a configuration describes for `problem`; `notes` receives what was not read.
// Errors name the flag or key, its value and the fix.
using ReadFn = Result<Plan> (*)(const std::string& text, const Problem& problem, const std::string& source,
                                std::vector<std::string>& notes);
// The training setup a launcher's file states (--setup-from), as the keywords of bmpipe's options
// (app/model.cc: tp, pp, vpp, recompute, precision, ...), and notes: what the framework's defaults
// or the published-runs table's conventions supplied, and what was not read.
struct LauncherSetup {
  Json keywords = Json::object();
  std::vector<std::string> notes;
  // The model's shape as the file states it (flag, value: "--num-layers" 32, "--hidden-size",
  // "--num-experts", "--moe-router-topk", "--moe-ffn-hidden-size"), for a check against --model.
  std::vector<std::pair<std::string, std::int64_t>> model_shape;
  std::string format;         // what the file is, for the report ("Megatron-LM arguments")
  // The configuration whose plan simulate reads (Megatron-LM flags a Megatron-Bridge file amounts
  // to; the file itself), in `plan_format`; empty: the file names no stages.
  std::string plan_text;
  FrameworkId plan_format = FrameworkId::kMegatron;
  // What the file states that bmpipe cannot cost, by the keyword that would say it instead, with
  // why: an error unless the command line gives that keyword.
  std::map<std::string, std::string> refused;
  // The batch per data-parallel rank when the file states no global batch (torchtitan's
  // local_batch_size): the global batch is it times the data-parallel size. 0: none.
  std::int64_t local_batch = 0;
};
using ReadSetupFn = Result<LauncherSetup> (*)(const std::string& text, const std::string& source);
// Whether a file's text is this framework's configuration; an error when it looks like one but
// cannot be (the message says what to give).
using DetectFn = Result<bool> (*)(const PlanText& text);

struct Framework {
  FrameworkId id;
  std::string_view format;  // its name in --export, export --to and --plan-format
  std::string_view writes;  // what the export holds, for --help
  TargetKind target;        // the target whose plans its export expresses by default
  ExportFn write;
  ReadFn read;              // null: its files fix no plan (why_not_read says why)
  std::string_view why_not_read;
  DetectFn detect;
  int detect_order;         // detectors run in increasing order; the first that says yes wins
  ReadSetupFn read_setup = nullptr;  // null: --setup-from does not read its files yet
};

// Every framework, in the order --help lists their formats.
const std::vector<Framework>& Frameworks();
const Framework& FrameworkOf(FrameworkId id);
// The format names: megatron, mindformers, deepspeed, torchtitan, csv.
std::vector<std::string> FormatNames();
// "unknown export format" errors name `what` ("--to", "--export").
Result<FrameworkId> ParseFormat(const std::string& name);
// The framework whose configuration carries a target's plans and is read back as the plan (none
// for any, and for torch: its CSV fixes the op order, not the stages).
std::optional<FrameworkId> ReadBackFormat(TargetKind kind);
// The target whose plans a format expresses (csv: torch).
TargetKind DefaultTarget(FrameworkId format);
// "megatron (pipeline layout and flags; ...), mindformers (...), ...": every format with what it holds.
std::string FormatsWithWhatTheyHold();

}  // namespace bmpipe

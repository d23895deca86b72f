// The torchtitan export: an argument file for torchtitan's trainer.
//
// torchtitan 0.3.0 has no TOML job files (checked against 0.3.0): a
// configuration is a Python function returning a Trainer.Config, chosen with `--module <model>
// --config <function>`, and `--<section>.<field> value` arguments override its fields
// (torchtitan/config/manager.py, tyro). The export is those arguments, one per line:
//  - parallelism.module_fqns_per_model_part: one argument per stage, its module names joined by
//    commas, chunk-major; torchtitan gives rank r the stages r, r + P, ... ("loop" placement) for
//    1F1B, GPipe and Interleaved1F1B, as bmpipe numbers them. Names: tok_embeddings, layers.<i>,
//    norm and lm_head.
//  - the microbatches: training.local_batch_size / parallelism.pipeline_parallel_microbatch_size,
//    made equal to the problem's micro-batches (torchtitan/distributed/pipeline_parallel.py).
//  - activation_checkpoint:none|full, a subcommand (last): FullAC wraps every child of `layers`
//    (the decoder layers) alike (torchtitan/distributed/activation_checkpoint.py).
#include <algorithm>

#include <fmt/format.h>

#include "bmpipe/frameworks/stages.h"
#include "bmpipe/frameworks/torchtitan/torchtitan.h"

namespace bmpipe {
namespace {

// torchtitan's --module and --config for the cost model's presets it also ships; empty otherwise.
// (torchtitan's llama3_405b trains its linear layers in float8, which bmpipe's bf16 costs do not
// describe: not used.)
std::pair<std::string, std::string> BaseConfig(const Problem& problem) {
  if (!problem.training) return {};
  for (const char* size : {"8b", "70b"}) {
    if (problem.training->model == std::string("llama3-") + size) return {"llama3", std::string("llama3_") + size};
  }
  return {};
}

}  // namespace

Result<std::string> ExportTorchTitan(const Problem& problem, const Plan& plan, TargetKind) {
  const ModelShape shape = ShapeOf(problem);
  const Pipeline& p = problem.pipeline;
  const WholeModelRecompute recompute = ClassifyWholeModelRecompute(problem, plan);
  const std::optional<TrainingInfo>& t = problem.training;
  const auto [module, config] = BaseConfig(problem);
  // The target's allow-list holds the schedules torch names a class for (ExportPlan checks it).
  const std::string_view torch_class = TraitsOf(p.schedule).torch_class;

  std::string out = Header(problem, plan, "#");
  out += "# torchtitan arguments for this plan, one per line. Needs torchtitan >= 0.3.0 (configurations are\n"
         "# Python functions chosen with --module/--config; checked against 0.3.0). Save as torchtitan.args,\n"
         "# write the schedule CSV it names beside it (bmpipe export --to csv --out schedule.csv), run\n"
         "#   torchrun --nproc_per_node=N -m torchtitan.train $(grep -v '^#' torchtitan.args)\n";
  if (module.empty()) {
    out += "# fill in the model's configuration function and uncomment:\n# --module MODEL\n# --config CONFIG_FUNCTION\n";
  } else {
    out += fmt::format("--module {}\n--config {}\n", module, config);
  }
  out += fmt::format("# the model must have {} decoder layers (layers.0 to layers.{})\n", shape.body(), shape.body() - 1);
  out += fmt::format("--parallelism.pipeline_parallel_degree {}\n", p.ranks);
  out += fmt::format("--parallelism.pipeline_parallel_schedule {}\n", torch_class);
  out += "# the op order bmpipe simulated, per rank (bmpipe export --to csv writes this file)\n";
  out += "--parallelism.pipeline_parallel_schedule_csv schedule.csv\n";
  out += TraitsOf(p.schedule).placement == Placement::kV
             ? "# the modules of each stage, one argument per stage (the lines below), in stage order: rank r\n"
               "# holds stages r and 2 x pipeline_parallel_degree - 1 - r (ZBVZeroBubble's V)\n"
             : "# the modules of each stage, one argument per stage (the lines below), chunk-major: stage\n"
               "# v x pipeline_parallel_degree + r is chunk v of rank r\n";
  out += "--parallelism.module_fqns_per_model_part";
  for (StageIdx s = 0; s < plan.num_stages(); ++s) {
    // torchtitan's model always has the embedding and the head; they go where the problem's first
    // and last layers go (the first and last stage).
    std::vector<std::string> fqns;
    if (s == 0) fqns.push_back("tok_embeddings");
    for (LayerIdx l = plan.begin(s); l < plan.end(s); ++l) {
      if (l >= shape.body_begin && l < shape.body_end) fqns.push_back(fmt::format("layers.{}", l - shape.body_begin));
    }
    if (s + 1 == plan.num_stages()) fqns.insert(fqns.end(), {"norm", "lm_head"});
    out += fmt::format("\n    {}", fmt::join(fqns, ","));
  }
  out += "\n";
  const int microbatch = t ? t->micro_batch_size : 1;
  out += fmt::format("# torchtitan's microbatches: local_batch_size / pipeline_parallel_microbatch_size = {}, the plan's{}\n",
                     p.micro_batches, t ? "" : " (the problem has no `training` section: microbatches of 1 sequence)");
  out += fmt::format("--parallelism.pipeline_parallel_microbatch_size {}\n", microbatch);
  out += fmt::format("--training.local_batch_size {}\n", microbatch * p.micro_batches);
  if (t) {
    out += fmt::format("--training.global_batch_size {}\n", t->global_batch_size);
    out += fmt::format("--training.seq_len {}\n", t->seq_length);
    out += fmt::format("--parallelism.tensor_parallel_degree {}\n", t->tensor_parallel);
    if (t->context_parallel > 1) out += fmt::format("--parallelism.context_parallel_degree {}\n", t->context_parallel);
    const int stage = ZeroStage(*t);
    if (stage == 0) {
      out += "# ZeRO 0: data parallel replicates the model (shard degree 1)\n";
      out += fmt::format("--parallelism.data_parallel_replicate_degree {}\n--parallelism.data_parallel_shard_degree 1\n",
                         t->data_parallel);
    } else {
      // FSDP2 shards parameters, gradients and optimizer state; keeping the gathered parameters
      // from the forward to the backward (never) holds what ZeRO-2 holds, resharding them
      // (always) what ZeRO-3 holds. ZeRO-1 runs as the former, which keeps less.
      out += fmt::format("# ZeRO {}: FSDP over data parallel, parameters {} after the forward\n", stage,
                         stage == 3 ? "resharded" : "kept gathered");
      out += fmt::format("--parallelism.data_parallel_shard_degree {}\n--parallelism.data_parallel_replicate_degree 1\n",
                         t->data_parallel);
      out += fmt::format("--parallelism.fsdp_reshard_after_forward {}\n", stage == 3 ? "always" : "never");
    }
    // Explicit both ways: torchtitan's configurations enable sequence parallelism by default.
    out += t->sequence_parallel ? "--parallelism.enable_sequence_parallel\n" : "--parallelism.no-enable-sequence-parallel\n";
  } else {
    out += "# the problem has no `training` section: global batch size, sequence length, tensor and data\n"
           "# parallel degrees are the base configuration's\n";
  }
  out += "# torchtitan refuses CUDA graphs with pipeline parallelism\n--training.disable_cuda_graphs\n";
  if (recompute == WholeModelRecompute::kNeither) {
    out += WholeModelRecomputeNote(problem, plan, "activation_checkpoint:full", "torchtitan");
  }
  out += "# none: no activation checkpointing; full: every decoder layer recomputed whole (a subcommand: last)\n";
  out += recompute == WholeModelRecompute::kNone ? "activation_checkpoint:none\n" : "activation_checkpoint:full\n";
  return out;
}

}  // namespace bmpipe

// The DeepSpeed export: a Python module that DeepSpeed's pipeline engine applies as it is.
//
// DeepSpeed (checked against 0.19.8, deepspeed/runtime/pipe/module.py)
// takes no stage boundaries: PipelineModule.__init__ computes `self.parts` in
// `_partition_layers(method)` (uniform, parameters or type:REGEX), calls `_set_bounds(parts[stage],
// parts[stage + 1])` there, and then `_build()` builds only this rank's layers from those bounds;
// setting `parts` after construction changes nothing. The module's subclass therefore overrides
// `_partition_layers` to impose the plan's boundaries. Activation checkpointing cuts the local
// layers into blocks of `activation_checkpoint_interval` (also `ds_config["pipeline"]`, which the
// engine applies when > 0) and checkpoints a block when `_is_checkpointable(funcs)` says so; at
// interval 1 the subclass's override checkpoints exactly the layers the plan recomputes. DeepSpeed
// recomputes whole layers only: a layer with a partial option is checkpointed whole (more than
// the plan), and the export says so. The pipeline engine runs one schedule, 1F1B (TrainSchedule),
// with `gradient_accumulation_steps` micro-batches.
#include <algorithm>

#include <fmt/format.h>

#include "bmpipe/core/text.h"
#include "bmpipe/frameworks/deepspeed/deepspeed.h"
#include "bmpipe/frameworks/stages.h"
#include "bmpipe/problem/recompute.h"
#include "bmpipe/sim/simulator.h"

namespace bmpipe {

namespace {

// `["embedding"] + ["decoder"] * 10 + ["lm_head"]`: the layer names, runs collapsed.
std::string LayerNames(const Problem& problem) {
  std::vector<std::string> runs;
  for (LayerIdx l = 0; l < problem.num_layers();) {
    LayerIdx end = l;
    while (end < problem.num_layers() && problem.layers[end].name == problem.layers[l].name) ++end;
    runs.push_back(fmt::format("[\"{}\"]{}", problem.layers[l].name, end - l > 1 ? fmt::format(" * {}", end - l) : ""));
    l = end;
  }
  return fmt::format("{}", fmt::join(runs, " + "));
}

}  // namespace

Result<std::string> ExportDeepSpeed(const Problem& problem, const Plan& plan, TargetKind) {
  const Pipeline& p = problem.pipeline;
  // The layers DeepSpeed checkpoints (whole): those the plan recomputes at all.
  std::vector<int> checkpointed;
  std::vector<std::string> approximated, recompute;
  Plan applied = plan;
  bool simulable = true;
  for (LayerIdx l = 0; l < problem.num_layers(); ++l) {
    const Layer& layer = problem.layers[l];
    const std::string name = OptionName(problem, plan, l);
    recompute.push_back(fmt::format("\"{}\"", name));
    if (plan.option[l] == NoneOption(layer)) continue;
    checkpointed.push_back(l);
    if (MeansRecompute(layer.options[plan.option[l]], Recompute{kRecomputeLayer})) continue;
    approximated.push_back(fmt::format("    {}: \"{}: DeepSpeed recomputes the whole layer\",", l, name));
    applied.option[l] = FindRecompute(layer, Recompute{kRecomputeLayer});
    simulable = simulable && applied.option[l] >= 0;
  }
  const int interval = checkpointed.empty() ? 0 : 1;

  std::string out = Header(problem, plan, "#");
  out += "# A DeepSpeed pipeline launch of this plan, as a Python module. Needs DeepSpeed >= 0.19.8 (the\n"
         "# PipelineModule construction path it hooks was checked against that version). Save it beside the\n"
         "# training script under a name other than deepspeed.py (e.g. bmpipe_plan.py), then:\n"
         "#   from bmpipe_plan import BmpipePipelineModule, ds_config\n"
         "#   model = BmpipePipelineModule(layers=LAYER_SPECS, loss_fn=...)\n"
         "#   engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=ds_config)\n"
         "# LAYER_SPECS: the problem's layers in order, one entry each (layer_names).\n";
  out += "from deepspeed.pipe import PipelineModule\n\n";
  out += fmt::format("num_stages = {}\n", p.ranks);
  out += fmt::format("micro_batches = {}\n", p.micro_batches);
  out += "layer_names = " + LayerNames(problem) + "\n";
  out += "# Stage s builds layers parts[s] to parts[s + 1] - 1 (DeepSpeed's `parts`).\n";
  out += "parts = " + List(std::vector<int>(plan.stage_begin.begin(), plan.stage_begin.end())) + "\n";
  out += fmt::format("# The plan's option of every layer.\nrecompute = [{}]\n", fmt::join(recompute, ", "));
  out += "# The layers DeepSpeed checkpoints: recomputed whole in the backward.\n";
  out += "checkpoint_layers = " + List(checkpointed) + "\n";
  out += fmt::format("activation_checkpoint_interval = {}  # 0 when checkpoint_layers is empty\n", interval);
  out += "# Layers checkpointed whole where the plan recomputes less (DeepSpeed has no partial recomputation).\n";
  if (approximated.empty()) {
    out += "approximated = {}\n";
  } else {
    out += "approximated = {\n" + fmt::format("{}", fmt::join(approximated, "\n")) + "\n}\n";
    if (!simulable) {
      out += "# bmpipe cannot simulate this setting: a layer in checkpoint_layers has no option that recomputes it\n"
             "# whole; add a 'full' option to the problem's layers to compare\n";
    } else {
      const SimResult want = SimulatePlan(problem, plan).value();
      const SimResult have = SimulatePlan(problem, applied).value();
      auto fit = [](const SimResult& sim) { return sim.fits ? "fits in memory" : "does NOT fit in memory"; };
      out += fmt::format("# with these layers checkpointed whole the simulated iteration is {} ({}) instead of the\n"
                         "# plan's {} ({}), {:+.1f} %\n",
                         FormatDuration(have.iteration_ns), fit(have), FormatDuration(want.iteration_ns), fit(want),
                         100.0 * (static_cast<double>(have.iteration_ns) / static_cast<double>(want.iteration_ns) - 1));
    }
  }
  out += "\nds_config = {\n";
  if (problem.training) {
    const TrainingInfo& t = *problem.training;
    out += fmt::format("    \"train_batch_size\": {},\n", t.global_batch_size);
    out += fmt::format("    \"train_micro_batch_size_per_gpu\": {},\n", t.micro_batch_size);
  } else {
    out += fmt::format("    # the problem has no `training` section; fill in and uncomment:\n"
                       "    # \"train_micro_batch_size_per_gpu\": SEQUENCES_PER_MICRO_BATCH,\n"
                       "    # \"train_batch_size\": SEQUENCES_PER_MICRO_BATCH * {} * DATA_PARALLEL_SIZE,\n",
                       p.micro_batches);
  }
  out += fmt::format("    \"gradient_accumulation_steps\": {},  # micro_batches\n", p.micro_batches);
  out += "    \"bf16\": {\"enabled\": True},\n";
  out += fmt::format("    \"pipeline\": {{\"activation_checkpoint_interval\": {}}},\n", interval);
  if (problem.training) {
    // TargetRunsSetup has refused what DeepSpeed's pipeline cannot run: ZeRO 0 or 1 here, fp32
    // gradients only with ZeRO 1 (its BF16_Optimizer), bf16 ones in either.
    const TrainingInfo& t = *problem.training;
    const int stage = ZeroStage(t);
    out += fmt::format("    \"data_types\": {{\"grad_accum_dtype\": \"{}\"}},  # the main gradients\n", t.grad_dtype);
    out += fmt::format("    \"zero_optimization\": {{\"stage\": {}{}}},\n", stage,
                       t.offload_optimizer ? ", \"offload_optimizer\": {\"device\": \"cpu\"}" : "");
  } else {
    out += "    # \"zero_optimization\": {\"stage\": 1},  # to shard the optimizer state over data parallel (ZeRO-1)\n";
  }
  out += "}\n";
  out += R"(

class BmpipePipelineModule(PipelineModule):
    """A PipelineModule with bmpipe's stage boundaries and checkpointed layers."""

    def __init__(self, layers, **kwargs):
        kwargs.setdefault("num_stages", num_stages)
        kwargs.setdefault("activation_checkpoint_interval", activation_checkpoint_interval)
        super().__init__(layers=layers, **kwargs)

    # PipelineModule.__init__ calls this, then builds this rank's layers from the bounds it sets.
    def _partition_layers(self, method="uniform"):
        if len(self._layer_specs) != parts[-1]:
            raise ValueError(f"bmpipe's plan partitions {parts[-1]} layers, but `layers` has "
                             f"{len(self._layer_specs)}; pass the planned problem's layers, one entry each")
        if self.num_stages != num_stages:
            raise ValueError(f"bmpipe's plan has {num_stages} pipeline stages, but num_stages is "
                             f"{self.num_stages}; leave num_stages to the plan")
        self.parts = list(parts)
        self._set_bounds(start=self.parts[self.stage_id], stop=self.parts[self.stage_id + 1])

    # At interval 1 each block is one layer: checkpoint exactly the plan's layers.
    def _is_checkpointable(self, funcs):
        local = {id(f): self._local_start + i for i, f in enumerate(self.forward_funcs)}
        return all(local[id(f)] in checkpoint_layers for f in funcs)
)";
  return out;
}

}  // namespace bmpipe

// The DeepSpeed export: a Python module that DeepSpeed's pipeline engine applies as it is.
//
// DeepSpeed (checked against 0.19.8, deepspeed/runtime/pipe/module.py) takes no stage boundaries:
// PipelineModule.__init__ computes `self.parts` in `_partition_layers(method)` (uniform,
// parameters or type:REGEX), calls `_set_bounds(parts[stage], parts[stage + 1])` there, and then
// `_build()` builds only this rank's layers from those bounds; setting `parts` after construction
// changes nothing. The module's subclass therefore overrides `_partition_layers` to impose the
// plan's boundaries. Activation checkpointing is one interval for every layer with parameters
// (`activation_checkpoint_interval`, also `ds_config["pipeline"]`, which the engine applies when
// > 0); the subclass narrows it to the decoder layers, as the plan's options describe them. The
// pipeline engine runs one schedule, 1F1B (TrainSchedule), with `gradient_accumulation_steps`
// micro-batches.
#include <fmt/format.h>

#include "bmpipe/io/export.h"
#include "bmpipe/io/export_common.h"
#include "bmpipe/problem/recompute.h"

namespace bmpipe {

Result<std::string> ExportDeepSpeed(const Problem& problem, const Plan& plan) {
  const Pipeline& p = problem.pipeline;
  if (p.chunks > 1) {
    return InvalidInput(fmt::format("virtual_stages = {}: DeepSpeed's pipeline engine has no interleaved schedule; plan "
                                    "with virtual_stages 1 to export to DeepSpeed",
                                    p.chunks));
  }
  if (p.schedule != ScheduleKind::kOneFOneB) {
    return InvalidInput(fmt::format("schedule = {}: DeepSpeed's pipeline engine runs 1F1B only; plan with schedule 1f1b "
                                    "to export to DeepSpeed",
                                    ScheduleName(p.schedule)));
  }
  const ModelShape shape = ShapeOf(problem);
  const WholeModelRecompute recompute = ClassifyWholeModelRecompute(problem, plan);
  const int interval = recompute == WholeModelRecompute::kNone ? 0 : 1;

  std::string out = Header(problem, plan, "#");
  out += "# A DeepSpeed pipeline launch of this plan, as a Python module. Needs DeepSpeed >= 0.19.8 (the\n"
         "# PipelineModule construction path it hooks was checked against that version). Save it beside the\n"
         "# training script under a name other than deepspeed.py (e.g. bmpipe_plan.py), then:\n"
         "#   from bmpipe_plan import BmpipePipelineModule, NUM_STAGES, ds_config\n"
         "#   model = BmpipePipelineModule(layers=LAYER_SPECS, num_stages=NUM_STAGES, loss_fn=...)\n"
         "#   engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=ds_config)\n";
  out += fmt::format("# LAYER_SPECS: the problem's {} layers in order, one entry each", problem.num_layers());
  if (shape.body_begin > 0) out += fmt::format(" ({} = embedding", shape.body_begin - 1);
  out += fmt::format("{}{}-{} = decoder layers 0-{}", shape.body_begin > 0 ? ", " : " (", shape.body_begin,
                     shape.body_end - 1, shape.body() - 1);
  if (shape.body_end < problem.num_layers()) out += fmt::format(", {} = head", shape.body_end);
  out += ").\n";
  out += "from deepspeed.pipe import PipelineModule\n\n";
  out += fmt::format("NUM_STAGES = {}\n", p.ranks);
  out += "# Stage s builds layers PARTS[s] to PARTS[s + 1] - 1 (DeepSpeed's `parts`):\n";
  for (StageIdx s = 0; s < plan.num_stages(); ++s) {
    out += fmt::format("#   stage {}: layers {}-{}\n", s, plan.begin(s), plan.end(s) - 1);
  }
  out += "PARTS = " + List(std::vector<int>(plan.stage_begin.begin(), plan.stage_begin.end())) + "\n";
  out += "# The decoder layers, first and one past the last: only they are checkpointed.\n";
  out += fmt::format("DECODER_LAYERS = [{}, {}]\n", shape.body_begin, shape.body_end);
  out += "# 0: no activation checkpointing; 1: every decoder layer recomputed whole in the backward.\n";
  out += fmt::format("ACTIVATION_CHECKPOINT_INTERVAL = {}\n", interval);
  if (recompute == WholeModelRecompute::kNeither) {
    out += WholeModelRecomputeNote(problem, plan, "ACTIVATION_CHECKPOINT_INTERVAL = 1", "DeepSpeed");
  }
  out += R"(

class BmpipePipelineModule(PipelineModule):
    """A PipelineModule with bmpipe's stage boundaries and checkpointing."""

    def __init__(self, layers, **kwargs):
        kwargs.setdefault("activation_checkpoint_interval", ACTIVATION_CHECKPOINT_INTERVAL)
        super().__init__(layers, **kwargs)

    # PipelineModule.__init__ calls this, then builds this rank's layers from the bounds it sets.
    def _partition_layers(self, method="parameters"):
        if len(self._layer_specs) != PARTS[-1]:
            raise ValueError(f"bmpipe's plan partitions {PARTS[-1]} layers, but `layers` has "
                             f"{len(self._layer_specs)}; pass the planned problem's layers, one entry each")
        if self.num_stages != NUM_STAGES:
            raise ValueError(f"bmpipe's plan has {NUM_STAGES} pipeline stages, but num_stages is "
                             f"{self.num_stages}; pass num_stages=NUM_STAGES")
        self.parts = list(PARTS)
        stage_id = self._topo.get_coord(self.global_rank).pipe
        self._set_bounds(start=self.parts[stage_id], stop=self.parts[stage_id + 1])

    # DeepSpeed checkpoints every layer with parameters at interval 1; the plan, its decoder layers.
    def _precompute_checkpointable_values(self):
        super()._precompute_checkpointable_values()
        if self.activation_checkpoint_interval == 1:
            first, stop = DECODER_LAYERS
            self.is_checkpointable_results = [
                first <= self._local_start + i < stop for i in range(len(self.forward_funcs))
            ]


)";
  out += "ds_config = {\n";
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
  out += fmt::format("    \"gradient_accumulation_steps\": {},  # the micro-batches of one iteration\n", p.micro_batches);
  out += "    \"bf16\": {\"enabled\": True},\n";
  if (problem.training) {
    out += fmt::format("    \"zero_optimization\": {{\"stage\": {}}},\n", problem.training->distributed_optimizer ? 1 : 0);
  } else {
    out += "    # \"zero_optimization\": {\"stage\": 1},  # to shard the optimizer state over data parallel (ZeRO-1)\n";
  }
  out += fmt::format("    \"pipeline\": {{\"activation_checkpoint_interval\": {}}},\n", interval);
  out += "}\n";
  return out;
}

}  // namespace bmpipe

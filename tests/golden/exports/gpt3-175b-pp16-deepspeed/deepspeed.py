# bmpipe plan for gpt3-175b on a100-40gb: tp 8 pp 16 dp 8 vpp 1, micro-batch 1 x 2048 tokens, global batch 1536: 16 ranks x 1 chunk, 192 micro-batches; simulated iteration 27.778 s
# A DeepSpeed pipeline launch of this plan, as a Python module. Needs DeepSpeed >= 0.19.8 (the
# PipelineModule construction path it hooks was checked against that version). Save it beside the
# training script under a name other than deepspeed.py (e.g. bmpipe_plan.py), then:
#   from bmpipe_plan import BmpipePipelineModule, ds_config
#   model = BmpipePipelineModule(layers=LAYER_SPECS, loss_fn=...)
#   engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=ds_config)
# LAYER_SPECS: the problem's layers in order, one entry each (layer_names).
from deepspeed.pipe import PipelineModule

num_stages = 16
micro_batches = 192
layer_names = ["embedding"] + ["decoder"] * 96 + ["head"]
# Stage s builds layers parts[s] to parts[s + 1] - 1 (DeepSpeed's `parts`).
parts = [0, 6, 12, 17, 23, 28, 34, 40, 46, 52, 58, 64, 70, 76, 83, 90, 98]
# The plan's option of every layer.
recompute = ["none", "none", "full", "full", "full", "full", "none", "full", "full", "full", "full", "full", "none", "none", "full", "full", "full", "none", "full", "full", "full", "full", "full", "none", "none", "full", "full", "full", "none", "full", "full", "full", "full", "full", "none", "none", "full", "full", "full", "full", "none", "none", "full", "full", "full", "full", "none", "none", "full", "full", "full", "full", "none", "none", "none", "full", "full", "full", "none", "none", "none", "none", "full", "full", "none", "none", "none", "none", "full", "full", "none", "none", "none", "none", "none", "none", "none", "none", "none", "none", "none", "full", "full", "none", "none", "none", "none", "none", "none", "none", "none", "none", "none", "none", "none", "none", "none", "none"]
# The layers DeepSpeed checkpoints: recomputed whole in the backward.
checkpoint_layers = [2, 3, 4, 5, 7, 8, 9, 10, 11, 14, 15, 16, 18, 19, 20, 21, 22, 25, 26, 27, 29, 30, 31, 32, 33, 36, 37, 38, 39, 42, 43, 44, 45, 48, 49, 50, 51, 55, 56, 57, 62, 63, 68, 69, 81, 82]
activation_checkpoint_interval = 1  # 0 when checkpoint_layers is empty
# Layers checkpointed whole where the plan recomputes less (DeepSpeed has no partial recomputation).
approximated = {}

ds_config = {
    "train_batch_size": 1536,
    "train_micro_batch_size_per_gpu": 1,
    "gradient_accumulation_steps": 192,  # micro_batches
    "bf16": {"enabled": True},
    "pipeline": {"activation_checkpoint_interval": 1},
    "zero_optimization": {"stage": 0},
}


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

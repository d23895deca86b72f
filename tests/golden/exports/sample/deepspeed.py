# bmpipe plan for sample: 4 ranks x 1 chunk, 8 micro-batches; simulated iteration 1.135 s
# DeepSpeed (0.19) pipeline: build the model with BmpipePipelineModule, one LayerSpec per entry of
# layer_names, and pass ds_config to deepspeed.initialize:
#   model = BmpipePipelineModule(layers=specs, loss_fn=...)
#   engine, _, _, _ = deepspeed.initialize(model=model, config=ds_config, model_parameters=...)
from deepspeed.pipe import PipelineModule

num_stages = 4
micro_batches = 8
# the problem's layers in order; the model's layer list must have exactly these, one LayerSpec each
layer_names = ["embedding"] + ["decoder"] * 10 + ["lm_head"]
# stage s builds layers parts[s] .. parts[s + 1] - 1
parts = [0, 3, 6, 9, 12]
# the plan's recomputation option of each layer
recompute = ["none", "full", "none", "full", "none", "none", "full", "none", "none", "full", "none", "none"]
# layers DeepSpeed checkpoints (whole-layer recomputation: the only kind DeepSpeed has)
checkpoint_layers = [1, 3, 6, 9]
activation_checkpoint_interval = 1
# layers whose option DeepSpeed cannot express, with what it does instead (recomputes more)
approximated = {}

ds_config = {
    "train_batch_size": 16,
    "train_micro_batch_size_per_gpu": 1,
    "gradient_accumulation_steps": 8,
    "pipeline": {"activation_checkpoint_interval": 1},
    "zero_optimization": {"stage": 1},
}


class BmpipePipelineModule(PipelineModule):
    """PipelineModule with bmpipe's stage boundaries and per-layer activation checkpointing."""

    def __init__(self, layers, **kwargs):
        kwargs.setdefault("num_stages", num_stages)
        kwargs.setdefault("activation_checkpoint_interval", activation_checkpoint_interval)
        super().__init__(layers=layers, **kwargs)

    def _partition_layers(self, method="uniform"):
        if len(self._layer_specs) != parts[-1]:
            raise ValueError(f"bmpipe plan has {parts[-1]} layers, the model {len(self._layer_specs)}")
        if self.num_stages != num_stages:
            raise ValueError(f"bmpipe plan has {num_stages} stages, the topology {self.num_stages}")
        self.parts = list(parts)
        self._set_bounds(start=self.parts[self.stage_id], stop=self.parts[self.stage_id + 1])

    def _is_checkpointable(self, funcs):
        local = {id(f): self._local_start + i for i, f in enumerate(self.forward_funcs)}
        return all(local[id(f)] in checkpoint_layers for f in funcs)

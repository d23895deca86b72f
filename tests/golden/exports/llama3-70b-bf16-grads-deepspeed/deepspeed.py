# bmpipe plan for llama3-70b on h100-80gb: tp 8 pp 4 dp 8 vpp 1, micro-batch 1 x 8192 tokens, global batch 256, sequence parallel, flash attention, bf16 gradients: 4 ranks x 1 chunk, 32 micro-batches; simulated iteration 10.470 s
# A DeepSpeed pipeline launch of this plan, as a Python module. Needs DeepSpeed >= 0.19.8 (the
# PipelineModule construction path it hooks was checked against that version). Save it beside the
# training script under a name other than deepspeed.py (e.g. bmpipe_plan.py), then:
#   from bmpipe_plan import BmpipePipelineModule, ds_config
#   model = BmpipePipelineModule(layers=LAYER_SPECS, loss_fn=...)
#   engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=ds_config)
# LAYER_SPECS: the problem's layers in order, one entry each (layer_names).
from deepspeed.pipe import PipelineModule

num_stages = 4
micro_batches = 32
layer_names = ["embedding"] + ["decoder"] * 80 + ["head"]
# Stage s builds layers parts[s] to parts[s + 1] - 1 (DeepSpeed's `parts`).
parts = [0, 21, 42, 62, 82]
# The plan's option of every layer.
recompute = ["none", "none", "none", "none", "none", "none", "none", "none", "none", "none", "none", "none", "none", "none", "none", "none", "none", "none", "none", "none", "none", "none", "none", "none", "none", "none", "none", "none", "none", "none", "none", "none", "none", "none", "none", "none", "none", "none", "none", "none", "none", "none", "none", "none", "none", "none", "none", "none", "none", "none", "none", "none", "none", "none", "none", "none", "none", "none", "none", "none", "none", "none", "none", "none", "none", "none", "none", "none", "none", "none", "none", "none", "none", "none", "none", "none", "none", "none", "none", "none", "none", "none"]
# The layers DeepSpeed checkpoints: recomputed whole in the backward.
checkpoint_layers = []
activation_checkpoint_interval = 0  # 0 when checkpoint_layers is empty
# Layers checkpointed whole where the plan recomputes less (DeepSpeed has no partial recomputation).
approximated = {}

ds_config = {
    "train_batch_size": 256,
    "train_micro_batch_size_per_gpu": 1,
    "gradient_accumulation_steps": 32,  # micro_batches
    "bf16": {"enabled": True},
    "pipeline": {"activation_checkpoint_interval": 0},
    "data_types": {"grad_accum_dtype": "bf16"},  # the main gradients
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

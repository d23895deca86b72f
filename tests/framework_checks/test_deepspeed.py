"""deepspeed.py checked with DeepSpeed 0.19.8's own PipelineModule and DeepSpeedConfig.

The export is a Python module (docs/exports.md). It is
imported from its path; one process per pipeline stage (fork, gloo, CPU) builds its
BmpipePipelineModule from stand-in LayerSpecs (a tiny Linear per problem layer, its class named
after the layer's role) and reports the layers DeepSpeed built locally and which of them its
forward would checkpoint (DeepSpeed's _precompute_checkpointable_values over
_is_checkpointable). The ds_config goes through DeepSpeedConfig with the problem's data-parallel
size.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys

import pytest

import bmcase
from conftest import cases_with, require
from distrun import run_ranks


def load_export(path):
    spec = importlib.util.spec_from_file_location(f"bmpipe_ds_export_{abs(hash(str(path)))}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _stand_in_classes():
    import torch

    class Embedding(torch.nn.Linear):
        pass

    class Decoder(torch.nn.Linear):
        pass

    class Head(torch.nn.Linear):
        pass

    return {"embedding": Embedding, "decoder": Decoder, "head": Head}


def _build_stage(rank, world, path, roles, ds_config, dp):
    import deepspeed
    # The CPU accelerator's TorchBackend JIT-compiles a shared-memory allreduce op with g++
    # (deepspeed/comm/torch.py build_shm_op, a minute or more); it plays no part in building
    # the layers, so it is turned off here.
    importlib.import_module("deepspeed.comm.torch").build_shm_op = lambda: None
    deepspeed.init_distributed(dist_backend="gloo", auto_mpi_discovery=False, verbose=False)
    from deepspeed.pipe import LayerSpec

    from deepspeed.runtime.config import DeepSpeedConfig
    ds = DeepSpeedConfig(ds_config, mpu=_Mpu(dp))  # asserts train_batch == micro * gas * dp
    interval_from_config = ds.pipeline["activation_checkpoint_interval"]
    export = load_export(path)
    cls = _stand_in_classes()
    specs = [LayerSpec(cls[r], 2, 2) for r in roles]
    model = export.BmpipePipelineModule(layers=specs)
    if interval_from_config > 0:  # what PipelineEngine does with ds_config["pipeline"]
        model.activation_checkpoint_interval = interval_from_config
    model._precompute_checkpointable_values()
    local = list(range(model._local_start, model._local_stop))
    kinds = [type(f).__name__ for f in model.forward_funcs]
    ckpt = []
    k = model.activation_checkpoint_interval
    if k > 0:
        for block, flag in zip(range(0, len(local), k), model.is_checkpointable_results):
            if flag:
                ckpt += local[block:block + k]
    # The optimizer wrapper the engine picks from these dtypes (DeepSpeedEngine._do_optimizer_sanity_check,
    # reproduced: it needs an engine); None is the model's dtype.
    from deepspeed.runtime.config import DtypeEnum
    grad_accum = None if ds.grad_accum_dtype is None else DtypeEnum(ds.grad_accum_dtype).value  # as the engine reads it
    offload = ds.zero_config.offload_optimizer
    out = dict(grad_accum=str(grad_accum) if grad_accum is not None else None, zero_stage=int(ds.zero_optimization_stage),
               offload=str(offload.device) if offload is not None else None, bf16=bool(ds.bfloat16_config.enabled),
               gas=ds.gradient_accumulation_steps, mbs=ds.train_micro_batch_size_per_gpu,
               tbs=ds.train_batch_size, interval=interval_from_config, stage=model.stage_id, parts=list(model.parts), local=local, kinds=kinds, ckpt=ckpt,
               num_stages=model.num_stages)
    import deepspeed.comm as dist
    dist.barrier()
    return out


class _Mpu:
    """The grid methods DeepSpeedConfig asks for (PipelineEngine passes its grid)."""

    def __init__(self, dp):
        self.dp = dp

    def get_data_parallel_world_size(self):
        return self.dp

    def get_sequence_parallel_world_size(self):
        return 1


@pytest.mark.parametrize("case", cases_with("deepspeed.py"), indirect=True)
def test_deepspeed_export(case):
    require("deepspeed")
    path = case.file("deepspeed.py")
    export = load_export(path)
    P, M, tr = case.P, case.M, case.training
    assert case.V == 1, "DeepSpeed has no interleaved schedule: an export with V > 1 is wrong"
    assert export.num_stages == P
    assert list(export.layer_names) == case.layer_names, "layer_names != the problem's layers"
    assert list(export.recompute) == [case.option_of(i) for i in range(len(case.layer_names))]

    cfg = export.ds_config
    mbs = cfg["train_micro_batch_size_per_gpu"]
    gas = cfg["gradient_accumulation_steps"]
    assert gas == M, f"gradient_accumulation_steps {gas} must be the plan's {M} micro-batches"
    dp = tr.get("data_parallel", cfg["train_batch_size"] // (mbs * gas))
    stage = cfg.get("zero_optimization", {}).get("stage", 0)
    assert stage in (0, 1), "the pipeline engine takes ZeRO stage 0 or 1"
    want_stage = max(int(tr.get("zero_stage", 0)), 1 if tr.get("distributed_optimizer") else 0)
    if "distributed_optimizer" in tr:
        assert stage == want_stage, f"ZeRO stage {stage}, the problem's {want_stage}"

    # -- every stage builds its PipelineModule; ds_config goes through DeepSpeedConfig ------------
    results = run_ranks(_build_stage, P, str(path), case.roles, cfg, dp, timeout=180)
    ds = results[0]
    assert ds["gas"] == M
    assert ds["bf16"], "bf16 training"
    if "distributed_optimizer" in tr:
        assert ds["zero_stage"] == want_stage
        assert (ds["offload"] is not None and "cpu" in ds["offload"]) == bool(tr.get("offload_optimizer")), \
            "zero_optimization.offload_optimizer.device cpu iff the problem offloads the optimizer"
        # DeepSpeed's bf16 pipeline: gradients in grad_accum_dtype (None: the model's bf16); fp32
        # accumulation without ZeRO is an unsupported mix (the engine raises NotImplementedError).
        grads = "fp32" if ds["grad_accum"] == "torch.float32" else "bf16"
        assert grads == tr.get("grad_dtype", "fp32"), f"gradients accumulate in {grads}"
        assert grads == "bf16" or ds["zero_stage"] >= 1, "fp32 gradient accumulation needs ZeRO in bf16 DeepSpeed"
    if "micro_batch_size" in tr:
        assert ds["mbs"] == tr["micro_batch_size"]
    if "global_batch_size" in tr:
        assert ds["tbs"] == tr["global_batch_size"]
    assert ds["interval"] in (0, export.activation_checkpoint_interval), \
        "ds_config pipeline.activation_checkpoint_interval disagrees with the module's"
    kind = {"embedding": "Embedding", "decoder": "Decoder", "head": "Head"}
    checkpointed = set()
    for s, r in enumerate(results):
        assert r["stage"] == s and r["num_stages"] == P
        assert r["local"] == case.stages[s].layers, f"stage {s}: DeepSpeed built {r['local']}, plan {case.stages[s].layers}"
        assert r["kinds"] == [kind[case.roles[i]] for i in r["local"]]
        checkpointed |= set(r["ckpt"])

    # -- recomputation: DeepSpeed recomputes whole layers or nothing -----------------------------
    approx = {int(k): v for k, v in dict(getattr(export, "approximated", {})).items()}
    for i, want in enumerate(case.layer_parts()):
        done = bmcase.FULL if i in checkpointed else frozenset()
        if i in approx:
            assert bmcase.covers(done, want), f"layer {i}: approximated but recomputes less than the plan"
        else:
            assert done == want, (f"layer {i} ({case.layer_names[i]}): plan {case.option_of(i)!r}, "
                                  f"DeepSpeed {'checkpoints it' if done else 'does not checkpoint it'}"
                                  f" (list it in `approximated` if the export knowingly recomputes more)")
    assert sorted(checkpointed) == sorted(export.checkpoint_layers)

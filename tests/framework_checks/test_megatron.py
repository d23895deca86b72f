"""megatron.args checked with megatron-core 0.16.1's own code.

The file is Megatron-LM command-line arguments (one flag with its values per line, '#' comments,
shlex syntax). The pip package has no megatron/training/arguments.py, so the flags are parsed the
way Megatron-LM's ArgumentGroupFactory builds them from megatron-core's dataclasses (flag =
'--' + field name with '-' for '_', or the field's argparse_meta arg_names), plus the few
Megatron-LM training flags listed in LM_FLAGS; any other flag fails. Then:
  - TransformerConfig(**fields) runs its own __post_init__ validation;
  - the layout string is parsed by PipelineParallelLayerLayout and must give, per (pp rank,
    virtual stage), exactly the plan's decoder layers, E on the first stage and L on the last;
  - real TransformerBlocks (local spec, gloo, world size 1) are built per (pp rank, virtual
    stage) and a training forward is run through Megatron's own _checkpointed_forward to see
    which layers it checkpoints; selective parts are read off the built layers;
  - parallel and batch flags agree with problem.json (pipeline, optional training section).
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import typing

import pytest

import bmcase
from conftest import cases_with, require
from distrun import run_ranks

# Megatron-LM flags that are not megatron-core dataclass fields: name -> argparse kwargs.
LM_FLAGS = {
    "--micro-batch-size": dict(type=int),
    "--global-batch-size": dict(type=int),
    "--seq-length": dict(type=int),
    "--use-distributed-optimizer": dict(action="store_true"),
    "--use-flash-attn": dict(action="store_true"),
    "--decoder-first-pipeline-num-layers": dict(type=int),
    "--decoder-last-pipeline-num-layers": dict(type=int),
    "--num-layers-per-virtual-pipeline-stage": dict(type=int),
    "--num-virtual-stages-per-pipeline-rank": dict(type=int),
    "--recompute-activations": dict(action="store_true"),
    "--no-overlap-p2p-communication": dict(action="store_false", dest="overlap_p2p_comm"),
    # megatron/training/arguments.py at core_v0.16.1: _add_moe_args, the optimizer and
    # distributed groups, and the CheckpointConfig flag Megatron-FSDP needs.
    "--num-experts": dict(type=int, dest="num_moe_experts"),
    "--moe-layer-freq": dict(type=lambda x: moe_freq_type(x), default=1),
    "--use-precision-aware-optimizer": dict(action="store_true"),
    "--main-grads-dtype": dict(default="fp32", choices=["fp32", "bf16"]),
    "--exp-avg-dtype": dict(default="fp32", choices=["fp32", "fp16", "bf16", "fp8"]),
    "--exp-avg-sq-dtype": dict(default="fp32", choices=["fp32", "fp16", "bf16", "fp8"]),
    "--optimizer-cpu-offload": dict(action="store_true"),
    # _add_mixed_precision_args; training.py passes it on as TransformerConfig.fp8_param and
    # DistributedDataParallelConfig.fp8_param_gather.
    "--fp8-param-gather": dict(action="store_true"),
    "--use-megatron-fsdp": dict(action="store_true"),
    "--data-parallel-sharding-strategy": dict(default="no_shard",
                                              choices=["no_shard", "optim", "optim_grads", "optim_grads_params"]),
    "--ckpt-format": dict(type=str),
    # _add_transformer_engine_args: the scopes are a list (TransformerConfig's field is a Union).
    "--cuda-graph-scope": dict(nargs="+", type=str, default=[]),
}
# TransformerConfig fields Megatron-LM's ArgumentGroupFactory leaves out (the LM flags above stand
# for them).
EXCLUDED_FIELDS = {"num_moe_experts", "moe_layer_freq", "cuda_graph_scope"}


def moe_freq_type(x):
    """Megatron-LM's moe_freq_type: N, or a Python list expression of 1 (MoE) and 0 (dense) layers,
    after its _eval_pattern character check."""
    import re
    if "[" not in x:
        return int(x)
    if re.search(r"[^,\d\[\]\(\)\+\*]", x):
        raise argparse.ArgumentTypeError(f"Invalid pattern: {x}")
    return eval(x)  # noqa: S307 (what Megatron-LM does, after the same check)


def moe_pattern(freq, layers):
    """megatron/core/transformer/moe/moe_utils.py: 1 for an MoE layer, 0 for a dense one."""
    if isinstance(freq, int):
        return [1 if i % freq == 0 else 0 for i in range(layers)]
    return list(freq)
# Model dimensions the export does not give (they come from the user's model script); used only
# so that TransformerConfig can be built and validated.
MODEL_DEFAULTS = dict(hidden_size=64, num_attention_heads=8)
# Checkpointed parts Megatron reports, in bmcase's vocabulary.
PART_NAMES = ("core_attn", "mlp", "layernorm")


def _field_kwargs(f: dataclasses.Field) -> dict:
    t = f.type if not isinstance(f.type, str) else None
    meta = dict((f.metadata or {}).get("argparse_meta", {}))
    meta.pop("arg_names", None)
    meta.pop("default", None)
    meta.pop("dest", None)
    if meta:
        return meta
    origin = typing.get_origin(t)
    args = [a for a in typing.get_args(t) if a is not type(None)]
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)) and len(args) == 1:
        t, origin, args = args[0], typing.get_origin(args[0]), list(typing.get_args(args[0]))
    if t is bool:
        return dict(action="store_true")
    if t in (int, float, str):
        return dict(type=t)
    if origin is typing.Literal:
        return dict(type=str, choices=[str(a) for a in args])
    if origin in (list, typing.List):
        return dict(type=str, nargs="+")
    if isinstance(t, type) and issubclass(t, enum.Enum):
        return dict(type=lambda s, _e=t: _e[s])
    return dict(type=str)


def megatron_parser():
    from megatron.core.transformer.transformer_config import TransformerConfig

    p = argparse.ArgumentParser(prog="megatron.args", add_help=False, allow_abbrev=False)
    fields = {}
    for f in dataclasses.fields(TransformerConfig):
        meta = (f.metadata or {}).get("argparse_meta", {})
        names = meta.get("arg_names") or ["--" + f.name.replace("_", "-")]
        if any(n in LM_FLAGS for n in names) or f.name in EXCLUDED_FIELDS:
            continue
        p.add_argument(*names, dest=f.name, default=argparse.SUPPRESS, **_field_kwargs(f))
        fields[f.name] = f
    for name, kw in LM_FLAGS.items():
        p.add_argument(name, **kw)
    return p, fields


def parse_megatron_args(case):
    argv, lines = bmcase.read_arg_lines(case.file("megatron.args"))
    for toks in lines:
        assert toks[0].startswith("--") and sum(t.startswith("--") for t in toks) == 1, \
            f"megatron.args: one flag per line, got {toks}"
    text = case.file("megatron.args").read_text()
    if "--pipeline-model-parallel-layout" in text:
        line = next(l for l in text.splitlines() if l.startswith("--pipeline-model-parallel-layout"))
        assert '"' in line, "megatron.args: the layout value must be double-quoted"
    parser, fields = megatron_parser()
    ns, unknown = parser.parse_known_args(argv)
    assert not unknown, f"megatron.args: flags Megatron-LM does not have: {unknown}"
    return vars(ns), fields


def config_kwargs(args: dict, fields: dict, **override) -> dict:
    """What core_transformer_config_from_args passes to TransformerConfig."""
    kw = {k: v for k, v in args.items() if k in fields or k in EXCLUDED_FIELDS}
    if args.get("decoder_first_pipeline_num_layers") is not None:
        kw["num_layers_in_first_pipeline_stage"] = args["decoder_first_pipeline_num_layers"]
    if args.get("decoder_last_pipeline_num_layers") is not None:
        kw["num_layers_in_last_pipeline_stage"] = args["decoder_last_pipeline_num_layers"]
    if args.get("recompute_activations"):
        kw["recompute_granularity"] = "selective"
    import torch
    kw.setdefault("pipeline_dtype", torch.bfloat16 if args.get("bf16") else
                  torch.float16 if args.get("fp16") else torch.float32)  # = args.params_dtype
    for k, v in MODEL_DEFAULTS.items():
        kw.setdefault(k, v)
    if kw.get("num_moe_experts"):
        # The MoE presets have no linear biases (the model script's --disable-bias-linear);
        # megatron-core takes biased experts only with expert tensor parallel 1.
        kw.setdefault("add_bias_linear", False)
    kw.update(override)
    return kw


def _build_blocks(rank, world, kw, P, V, local_spec):
    """Child process: build each (pp, vp) TransformerBlock and report what Megatron recomputes."""
    import torch
    import torch.distributed as dist
    from megatron.core import parallel_state as ps
    import megatron.core.transformer.transformer_block as tb
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.transformer.transformer_config import TransformerConfig

    dist.init_process_group("gloo", rank=0, world_size=1)
    ps.initialize_model_parallel(1, 1)
    cfg = TransformerConfig(**kw)
    ps.set_pipeline_model_parallel_world_size(P)
    if V > 1:
        ps.set_virtual_pipeline_model_parallel_world_size(V)
    out = {}
    state = {"in": False}

    def recording_checkpoint(fn, distribute, *inputs):
        state["in"] = True
        try:
            return fn(*inputs)
        finally:
            state["in"] = False

    orig = tb.tensor_parallel.checkpoint
    tb.tensor_parallel.checkpoint = recording_checkpoint
    try:
        for v in range(V):
            for p in range(P):
                ps.set_pipeline_model_parallel_rank(p)
                if V > 1:
                    ps.set_virtual_pipeline_model_parallel_rank(v)
                blk = tb.TransformerBlock(cfg, get_gpt_layer_local_spec(), pre_process=True,
                                          post_process=False, vp_stage=v if V > 1 else None)
                layers = {}
                for layer in blk.layers:
                    parts = set()
                    if layer.self_attention.checkpoint_core_attention:
                        parts.add("core_attn")
                    if layer.recompute_mlp:
                        parts.add("mlp")
                    if layer.recompute_input_layernorm or layer.recompute_pre_mlp_layernorm:
                        parts.add("layernorm")
                    # Fine-grained activation offloading: the modules whose inputs this layer offloads.
                    attn = layer.self_attention
                    for module, on in (("qkv_linear", getattr(attn, "offload_qkv_linear", False)),
                                       ("core_attn", getattr(attn, "offload_core_attention", False)),
                                       ("attn_proj", getattr(attn, "offload_attn_proj", False)),
                                       ("mlp_norm", getattr(layer, "offload_mlp_norm", False))):
                        if on:
                            parts.add("offload:" + module)
                    layers[layer.layer_number - 1] = parts

                    def fwd(hidden_states, _n=layer.layer_number - 1, **kwargs):
                        if state["in"]:
                            layers[_n] = {"full"}
                        return hidden_states, kwargs.get("context")
                    layer.forward = fwd
                blk.train()
                if len(blk.layers):
                    blk(torch.zeros(4, 1, cfg.hidden_size, requires_grad=True), attention_mask=None)
                out[(p, v)] = {n: sorted(s) for n, s in layers.items()}
    finally:
        tb.tensor_parallel.checkpoint = orig
    dist.destroy_process_group()
    return out


@pytest.mark.parametrize("case", cases_with("megatron.args"), indirect=True)
def test_megatron_args(case):
    require("megatron.core")
    from megatron.core.transformer.enums import LayerType
    from megatron.core.transformer.pipeline_parallel_layer_layout import PipelineParallelLayerLayout
    from megatron.core.transformer.transformer_config import TransformerConfig

    args, fields = parse_megatron_args(case)
    P, V, M, tr = case.P, case.V, case.M, case.training

    # -- parallel sizes and batch ----------------------------------------------------------------
    assert args.get("pipeline_model_parallel_size") == P, "--pipeline-model-parallel-size"
    assert args.get("num_layers") == case.num_decoder, "--num-layers must be the decoder layer count"
    tp = args.get("tensor_model_parallel_size", 1)
    mbs, gbs = args.get("micro_batch_size"), args.get("global_batch_size")
    assert mbs is not None and gbs is not None, "--micro-batch-size and --global-batch-size are needed"
    if "tensor_parallel" in tr:
        assert tp == tr["tensor_parallel"], "--tensor-model-parallel-size"
    if "sequence_parallel" in tr:
        assert bool(args.get("sequence_parallel", False)) == bool(tr["sequence_parallel"]) or tp == 1
    if "micro_batch_size" in tr:
        assert mbs == tr["micro_batch_size"], "--micro-batch-size"
    if "global_batch_size" in tr:
        assert gbs == tr["global_batch_size"], "--global-batch-size"
    if "seq_length" in tr:
        assert args.get("seq_length") == tr["seq_length"], "--seq-length"
    if "distributed_optimizer" in tr:
        assert bool(args.get("use_distributed_optimizer")) == bool(tr["distributed_optimizer"])
    if "flash_attention" in tr:
        flash = bool(args.get("use_flash_attn")) or str(args.get("attention_backend", "")).endswith("flash")
        assert flash == bool(tr["flash_attention"]), "--use-flash-attn / --attention-backend flash"
        if not tr["flash_attention"] and args.get("transformer_impl") == "transformer_engine":
            # Megatron's default backend (auto) would pick a fused kernel: the s x s scores the plan
            # costs are Transformer Engine's unfused attention.
            assert str(args.get("attention_backend", "")).endswith("unfused"), "--attention-backend unfused"
    # Megatron-LM: num_microbatches = global_batch_size / (micro_batch_size * data_parallel_size)
    assert gbs % (mbs * M) == 0, f"global batch {gbs} is not micro {mbs} x {M} micro-batches x dp"
    dp = gbs // (mbs * M)
    if "data_parallel" in tr:
        assert dp == tr["data_parallel"], f"gbs/(mbs*M) = {dp} data-parallel ranks, problem says {tr['data_parallel']}"

    # -- TransformerConfig validation (its own __post_init__) -------------------------------------
    kw = config_kwargs(args, fields)
    cfg = TransformerConfig(**kw)
    assert (cfg.virtual_pipeline_model_parallel_size or 1) == V, "virtual stages (layout) != problem"
    _check_setup(args, cfg, tr, case.num_decoder, pairs=bool(case.problem["pipeline"].get("overlap", False)))

    # -- layout --------------------------------------------------------------------------------
    layout_str = args.get("pipeline_model_parallel_layout")
    assert layout_str, "megatron.args must give --pipeline-model-parallel-layout (exact stages)"
    layout = PipelineParallelLayerLayout(layout_str, P)
    assert layout.virtual_pipeline_model_parallel_size == V
    for s, st in enumerate(case.stages):
        p, v = s % P, s // P
        got = _layer_ids(layout, p, v)
        if V == 1:  # megatron's own offset arithmetic (it reads parallel_state's VPP size, None here)
            assert layout.get_layer_id_list(LayerType.decoder, vp_stage=v, pp_rank=p) == got
        assert got == case.stage_decoders(s), f"stage {s} (pp {p}, vp {v}): layout {got}, plan {case.stage_decoders(s)}"
        kinds = layout.layout[p][v]
        assert (LayerType.embedding in kinds) == (s == 0), f"embedding must be on stage 0 only ({layout_str})"
        assert (LayerType.loss in kinds) == (s == P * V - 1), f"loss must be on the last stage only ({layout_str})"
    assert case.has_embedding and case.has_head, "Megatron exports need an embedding and a head layer"

    # -- interleaving: forward_backward_pipelining_with_interleaving's checks ---------------------
    if V > 1:
        g = cfg.microbatch_group_size_per_vp_stage
        assert P <= g <= M, f"microbatch_group_size_per_vp_stage {g} must be in [PP={P}, M={M}]"
        assert not (0 < M % g < P), f"M={M} % group {g} must be 0 or >= PP={P}"
        # Megatron-LM validate_args: with VPP and p2p overlap off, PP must be > 2
        assert P > 2 or args.get("overlap_p2p_comm", True), "interleaving without p2p overlap needs PP > 2"

    # -- recomputation: what Megatron's own modules do ---------------------------------------------
    local = args.get("transformer_impl") == "local"
    small = config_kwargs(args, fields, hidden_size=16, num_attention_heads=2, ffn_hidden_size=32,
                          tensor_model_parallel_size=1, sequence_parallel=False,
                          use_cpu_initialization=True, attention_backend=_local_attn(),
                          # the blocks are built with the dense local spec on one process
                          context_parallel_size=1, expert_model_parallel_size=1, expert_tensor_parallel_size=None,
                          num_moe_experts=None, moe_ffn_hidden_size=None, moe_shared_expert_intermediate_size=None,
                          moe_layer_freq=1, moe_grouped_gemm=False, moe_expert_capacity_factor=None, fp8=None,
                          tp_comm_overlap=False, overlap_moe_expert_parallel_comm=False,
                          moe_token_dispatcher_type="alltoall", cuda_graph_impl="none", cuda_graph_scope=[])
    (built,) = run_ranks(_build_blocks, 1, small, P, V, local)
    done, offloaded = {}, {}
    for (p, v), layers in built.items():
        assert sorted(layers) == case.stage_decoders(v * P + p), f"built layers of (pp {p}, vp {v})"
        for n, parts in layers.items():
            parts = frozenset(parts)
            if not local:
                # TE spec, dense layers: input_layernorm and pre_mlp_layernorm are IdentityOp (the norm
                # is fused into TELayerNormColumnParallelLinear), so transformer_layer.py does not set
                # recompute_input_layernorm / recompute_pre_mlp_layernorm: layernorm recompute is a no-op.
                # Likewise pre_mlp_layernorm's offload on a dense layer (Megatron skips an IdentityOp).
                parts = parts - {"layernorm", "offload:mlp_norm"}
            offloaded[n] = frozenset(x for x in parts if x.startswith("offload:"))
            done[n] = parts - offloaded[n]
    # Offload: every decoder layer whose option offloads has the problem's modules on (those a dense
    # layer of the blocks built here has), the others none.
    modules = case.problem.get("training", {}).get("offload_modules", [])
    layer_of = {d: i for i, d in case.decoder_of.items()}
    for n in sorted(offloaded):
        layer = layer_of[n]
        planned = "offload" in case.option_of(layer).split("+")
        expect = {"offload:" + m for m in modules if m in ("qkv_linear", "core_attn", "attn_proj")} if planned else set()
        assert offloaded[n] == expect, f"decoder layer {n}: plan offloads {sorted(expect) or 'nothing'}, Megatron {sorted(offloaded[n]) or 'nothing'}"
    want = case.decoder_parts()
    approx = bmcase.approximated(case.file("megatron.args"))
    for n in sorted(want):
        if approx:
            assert bmcase.covers(done[n], want[n]), \
                f"decoder layer {n}: plan recomputes {set(want[n])}, Megatron only {set(done[n])}"
        else:
            assert done[n] == want[n], (f"decoder layer {n}: plan recomputes {set(want[n]) or 'nothing'}, "
                                        f"Megatron {set(done[n]) or 'nothing'} (write '{bmcase.APPROX_MARKER}' "
                                        f"if the export knowingly recomputes more)")
    for i in (0, len(case.layer_names) - 1):
        assert bmcase.option_parts(case.option_of(i)) == frozenset() or approx, \
            f"layer {i} ({case.roles[i]}): Megatron cannot recompute the embedding or the loss"


def _check_setup(args, cfg, tr, layers, pairs=False):
    """The setup flags against the problem's training section, read through megatron-core's own
    TransformerConfig, OptimizerConfig and DistributedDataParallelConfig."""
    import sys
    import types

    import torch
    import megatron.core.optimizer.optimizer_config as optimizer_config
    from megatron.core.distributed import DistributedDataParallelConfig
    from megatron.core.optimizer import OptimizerConfig

    assert cfg.bf16, "--bf16: bmpipe's costs are bf16 training"
    assert cfg.context_parallel_size == tr.get("context_parallel", 1), "--context-parallel-size"
    assert cfg.expert_model_parallel_size == tr.get("expert_parallel", 1), "--expert-model-parallel-size"
    etp = tr.get("expert_tensor_parallel", 0) or cfg.tensor_model_parallel_size
    assert (cfg.expert_tensor_parallel_size or cfg.tensor_model_parallel_size) == etp, "--expert-tensor-parallel-size"
    # FP8 with a scale per tensor: hybrid E4M3/E5M2, delayed scaling; MXFP8: E4M3, a scale per 32 elements.
    # FP8 with a scale per tensor by the problem's recipe (tensorwise when it states none).
    want_fp8 = {"fp8": ("hybrid", tr.get("fp8_recipe", "tensorwise")),
                "mxfp8": ("e4m3", "mxfp8")}.get(tr.get("precision", "bf16"))
    assert (cfg.fp8 is None) == (want_fp8 is None), "--fp8-format given exactly for FP8 precisions"
    assert want_fp8 is None or (cfg.fp8, str(getattr(cfg.fp8_recipe, "value", cfg.fp8_recipe))) == want_fp8, \
        f"--fp8-format / --fp8-recipe {want_fp8}"
    # NVFP4: E2M1 with Transformer Engine's NVFP4BlockScaling (TransformerConfig refuses fp4 with fp8).
    want_fp4 = tr.get("precision") == "nvfp4"
    assert (cfg.fp4 == "e2m1") == want_fp4, "--fp4-format e2m1 given exactly for nvfp4"
    assert not want_fp4 or str(getattr(cfg.fp4_recipe, "value", cfg.fp4_recipe)) == "nvfp4", "--fp4-recipe nvfp4"
    assert cfg.tp_comm_overlap == bool(tr.get("tp_comm_overlap", False)), "--tp-comm-overlap"
    assert cfg.disable_parameter_transpose_cache == bool(tr.get("no_fp8_transpose_cache", False)), \
        "--disable-parameter-transpose-cache"
    fp8_weights = bool(args.get("fp8_param_gather"))
    fp4_weights = bool(cfg.fp4_param)
    assert (fp8_weights or fp4_weights) == bool(tr.get("fp8_params", False)), "--fp8-param-gather / --fp4-param-gather"
    assert not fp4_weights or want_fp4, "--fp4-param-gather only with nvfp4"
    if fp8_weights:
        # TransformerConfig.__post_init__: "fp8_param must be used together with fp8 mode"; and
        # Megatron-LM's validate_args: "--fp8-param-gather only supported with distributed
        # optimizer, torch fsdp2, megatron fsdp, or inference mode".
        assert cfg.fp8, "--fp8-param-gather without --fp8-format"
        assert args.get("use_distributed_optimizer") or args.get("use_megatron_fsdp"), \
            "--fp8-param-gather without the distributed optimizer or Megatron-FSDP"
    moe = tr.get("moe")
    if moe:
        assert cfg.num_moe_experts == moe["experts"] and cfg.moe_router_topk == moe["top_k"]
        assert cfg.moe_ffn_hidden_size == moe["expert_ffn"]
        assert (cfg.moe_shared_expert_intermediate_size or 0) == moe.get("shared_expert_ffn", 0)
        dense = [i for i, m in enumerate(moe_pattern(cfg.moe_layer_freq, layers)) if m == 0]
        assert dense == moe.get("dense_layers", []), f"--moe-layer-freq: dense layers {dense}"
        assert (cfg.moe_expert_capacity_factor or 0) == moe.get("capacity_factor", 0)
        assert cfg.moe_grouped_gemm, "--moe-grouped-gemm"
        dispatcher = moe.get("dispatcher", "alltoall")
        assert cfg.moe_token_dispatcher_type == dispatcher, "--moe-token-dispatcher-type"
        assert dispatcher != "flex" or cfg.moe_flex_dispatcher_backend == "deepep", "--moe-flex-dispatcher-backend"
        # The overlap is a fixed fraction (training.moe.comm_overlap) or the combined 1F1B's pairs
        # (pipeline.overlap): the same flag.
        assert cfg.overlap_moe_expert_parallel_comm == (bool(moe.get("comm_overlap", False)) or pairs), \
            "--overlap-moe-expert-parallel-comm"
        # TransformerConfig.__post_init__ turned the scope names into CudaGraphScope members.
        graphs = bool(moe.get("cuda_graphs", False))
        assert (cfg.cuda_graph_impl == "transformer_engine") == graphs, "--cuda-graph-impl transformer_engine"
        if graphs:
            assert sorted(s.name for s in cfg.cuda_graph_scope) == ["moe_preprocess", "moe_router"], \
                "--cuda-graph-scope moe_router moe_preprocess"
        else:
            assert cfg.cuda_graph_impl == "none", "--cuda-graph-impl"
    else:
        assert cfg.num_moe_experts is None, "--num-experts for a dense model"

    # ZeRO: the distributed optimizer (1), Megatron-FSDP's sharding strategy (2, 3).
    stage = max(int(tr.get("zero_stage", 0)), 1 if tr.get("distributed_optimizer") else 0)
    ddp = DistributedDataParallelConfig(use_distributed_optimizer=bool(args.get("use_distributed_optimizer")),
                                        use_megatron_fsdp=bool(args.get("use_megatron_fsdp")),
                                        fp8_param_gather=fp8_weights,
                                        data_parallel_sharding_strategy=args.get("data_parallel_sharding_strategy",
                                                                                  "no_shard"))
    got = 1 if ddp.use_distributed_optimizer else 0
    if ddp.use_megatron_fsdp:
        strategy = ddp.data_parallel_sharding_strategy
        got = max(got, {"no_shard": 0, "optim": 1, "optim_grads": 2, "optim_grads_params": 3}[strategy])
    assert got == stage, f"ZeRO stage {got} from the flags, {stage} in the problem"
    if ddp.use_megatron_fsdp:
        assert args.get("ckpt_format") == "fsdp_dtensor", "Megatron-LM: Megatron FSDP only supports fsdp_dtensor"

    # State dtypes and the CPU optimizer: megatron-core's OptimizerConfig validation, with
    # Transformer Engine's FusedAdam signature standing in for the package (not installed here).
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}
    if args.get("optimizer_cpu_offload"):
        assert args.get("use_precision_aware_optimizer"), \
            "Megatron-LM: --optimizer-cpu-offload needs --use-precision-aware-optimizer"
    te = types.ModuleType("transformer_engine.pytorch.optimizers")
    te.FusedAdam = lambda params, master_weight_dtype=None, exp_avg_dtype=None, exp_avg_sq_dtype=None, \
        use_decoupled_grad=False: None
    saved = {k: sys.modules.get(k) for k in ("transformer_engine", "transformer_engine.pytorch",
                                             "transformer_engine.pytorch.optimizers")}
    sys.modules.update({"transformer_engine": types.ModuleType("transformer_engine"),
                        "transformer_engine.pytorch": types.ModuleType("transformer_engine.pytorch"),
                        "transformer_engine.pytorch.optimizers": te})
    is_te = optimizer_config.is_te_min_version
    optimizer_config.is_te_min_version = lambda *a, **k: True
    try:
        opt = OptimizerConfig(optimizer="adam", bf16=True,
                              use_distributed_optimizer=bool(args.get("use_distributed_optimizer")),
                              use_precision_aware_optimizer=bool(args.get("use_precision_aware_optimizer")),
                              main_grads_dtype=dtype[args.get("main_grads_dtype", "fp32")],
                              exp_avg_dtype=dtype[args.get("exp_avg_dtype", "fp32")],
                              exp_avg_sq_dtype=dtype[args.get("exp_avg_sq_dtype", "fp32")],
                              optimizer_cpu_offload=bool(args.get("optimizer_cpu_offload")))
    finally:
        optimizer_config.is_te_min_version = is_te
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v
    assert opt.main_grads_dtype == dtype[tr.get("grad_dtype", "fp32")], "--main-grads-dtype"
    assert opt.exp_avg_dtype == opt.exp_avg_sq_dtype == dtype[tr.get("optimizer_dtype", "fp32")], "--exp-avg(-sq)-dtype"
    assert opt.optimizer_cpu_offload == bool(tr.get("offload_optimizer", False)), "--optimizer-cpu-offload"


def _layer_ids(layout, p, v):
    from megatron.core.transformer.enums import LayerType
    off = 0
    for vv in range(v + 1):
        for pp in range(layout.pipeline_model_parallel_size if vv < v else p):
            off += layout.layout[pp][vv].count(LayerType.decoder)
    n = layout.layout[p][v].count(LayerType.decoder)
    # the same numbers megatron's get_layer_offset / get_num_layers_to_build give when the virtual
    # world size is set (checked on the built blocks' layer_number too)
    return list(range(off, off + n))


def _local_attn():
    from megatron.core.transformer.enums import AttnBackend
    return AttnBackend.local

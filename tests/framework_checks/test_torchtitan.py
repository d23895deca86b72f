"""torchtitan.args and schedule.csv checked with torchtitan 0.3.0's and torch's own code.

torchtitan 0.3.0 reads no TOML: its ConfigManager takes `--module M --config F` (a config
registry function) and tyro overrides `--section.field value`. torchtitan.args holds exactly
those arguments (one per line, '#' comments, shlex syntax); the test parses them with
ConfigManager().parse_args (which validates Trainer.Config), splits a torchtitan model with the
problem's decoder layer count by the export's module_fqns_per_model_part using torchtitan's own
_split_module, and checks schedule, micro-batches, degrees and activation checkpointing.

schedule.csv is loaded by torch.distributed.pipelining's _PipelineScheduleRuntime._load_csv on
P gloo processes (each holding its V stages), which validates it and lowers it to send/recv
actions; the lowered schedule is then run through torch's _simulate_comms_compute.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

import bmcase
from conftest import cases_with, require
from distrun import run_ranks

SCHEDULE_NAMES = {("gpipe", False): "GPipe", ("1f1b", False): "1F1B",
                  ("1f1b", True): "Interleaved1F1B", ("interleaved-1f1b", True): "Interleaved1F1B",
                  ("zb-v", True): "ZBVZeroBubble", ("interleaved-zb", True): "InterleavedZeroBubble",
                  ("dualpipev", True): "DualPipeV"}

# The schedules whose op order is, by bmpipe's specification, the order of one of torch's own
# classes (docs/semantics.md, "Schedules"): the CSV must equal that class's order action by action.
TORCH_ORDER_CLASSES = {"zb-v": "ScheduleZBVZeroBubble", "interleaved-zb": "ScheduleInterleavedZeroBubble",
                       "dualpipev": "ScheduleDualPipeV"}


def parse_titan(case):
    argv, lines = bmcase.read_arg_lines(case.file("torchtitan.args"))
    if "--module" not in argv:
        # A model torchtitan does not ship: the export leaves --module/--config for the user to fill
        # in, and says so. The user's model stands in as torchtitan's llama3 debug model (its layer
        # count is set to the case's below).
        text = case.file("torchtitan.args").read_text()
        assert "# --module MODEL" in text and "# --config CONFIG_FUNCTION" in text, \
            "torchtitan.args needs --module and --config, or the comment asking for them"
        argv = ["--module", "llama3", "--config", "llama3_debugmodel"] + argv
    assert "--module" in argv and "--config" in argv, "torchtitan.args needs --module and --config"
    from torchtitan.config.manager import ConfigManager
    try:
        return ConfigManager().parse_args(argv), argv
    except SystemExit as e:  # tyro reports a bad argument and exits
        pytest.fail(f"torchtitan's ConfigManager rejected torchtitan.args (exit {e.code}); see the "
                    f"captured output above", pytrace=False)


def expected_fqns(case, s):
    out = []
    for i in case.stages[s].layers:
        role = case.roles[i]
        if role == "embedding":
            out.append("tok_embeddings")
        elif role == "head":
            out += ["norm", "lm_head"]
        else:
            out.append(f"layers.{case.decoder_of[i]}")
    return out


@pytest.mark.parametrize("case", cases_with("torchtitan.args"), indirect=True)
def test_torchtitan_args(case):
    require("torchtitan")
    import torch
    from torch.distributed.pipelining.schedules import PipelineScheduleSingle, get_schedule_class
    from torchtitan.distributed.activation_checkpoint import FullAC, SelectiveAC
    from torchtitan.distributed.pipeline_parallel import _get_pp_rank_to_stage_indices_mapping, _split_module

    cfg, argv = parse_titan(case)
    par, trn = cfg.parallelism, cfg.training
    P, V, M, tr = case.P, case.V, case.M, case.training

    # -- pipeline ---------------------------------------------------------------------------------
    assert par.pipeline_parallel_degree == P
    want_sched = SCHEDULE_NAMES.get((case.schedule, V > 1))
    assert want_sched, f"no torchtitan schedule for {case.schedule} with V={V}"
    assert par.pipeline_parallel_schedule == want_sched
    single = issubclass(get_schedule_class(par.pipeline_parallel_schedule), PipelineScheduleSingle)
    assert single == (V == 1), "single-stage schedule iff one chunk per rank"
    if par.pipeline_parallel_schedule_csv:
        csv = (case.folder / par.pipeline_parallel_schedule_csv)
        assert csv.resolve() == case.file("schedule.csv").resolve(), \
            "pipeline_parallel_schedule_csv must name the case's schedule.csv (relative to the args file)"

    # -- the stages each rank builds, by torchtitan's own mapping (loop, or V for ZBVZeroBubble) ------
    for r in range(P):
        got = _get_pp_rank_to_stage_indices_mapping(r, P, par.pipeline_parallel_schedule, P * V)
        assert tuple(got) == tuple(case.stage_at(r, v) for v in range(V)), \
            f"rank {r}: torchtitan builds stages {got}, the plan puts {[case.stage_at(r, v) for v in range(V)]} there"

    # -- module FQNs per model part, split by torchtitan -------------------------------------------
    parts = par.module_fqns_per_model_part
    assert parts is not None and len(parts) == P * V, f"{len(parts or [])} model parts, want P*V = {P * V}"
    m = cfg.model_spec.model
    m = dataclasses.replace(m, layers=[m.layers[0]] * case.num_decoder)
    with torch.device("meta"):
        model = m.build()
    for s in range(P * V):
        want = expected_fqns(case, s)
        assert parts[s] == want, f"model part {s}: {parts[s]}, plan {want}"
        part = _split_module(model, parts[s])
        kept = [n for n, c in part.named_children() if c is not None and n != "layers"]
        kept += [f"layers.{k}" for k in part.layers.keys()]
        assert sorted(kept) == sorted(want), f"torchtitan's _split_module kept {kept} for part {s}, want {want}"

    # -- micro-batches and batch ---------------------------------------------------------------------
    mbs = par.pipeline_parallel_microbatch_size
    assert trn.local_batch_size % mbs == 0
    assert trn.local_batch_size // mbs == M, \
        f"n_microbatches = local_batch_size {trn.local_batch_size} // microbatch {mbs} != {M}"
    dp = par.data_parallel_shard_degree * par.data_parallel_replicate_degree
    assert par.data_parallel_shard_degree >= 1, "give data_parallel_shard_degree explicitly (not -1)"
    gbs = trn.global_batch_size if trn.global_batch_size > 0 else trn.local_batch_size * dp
    assert gbs == trn.local_batch_size * dp, "one gradient-accumulation step: global = local x dp"
    if "micro_batch_size" in tr:
        assert mbs == tr["micro_batch_size"]
    if "global_batch_size" in tr:
        assert gbs == tr["global_batch_size"]
    if "data_parallel" in tr:
        assert dp == tr["data_parallel"]
    if "tensor_parallel" in tr:
        assert par.tensor_parallel_degree == tr["tensor_parallel"]
    if "sequence_parallel" in tr and par.tensor_parallel_degree > 1:
        assert par.enable_sequence_parallel == bool(tr["sequence_parallel"])
    if "seq_length" in tr:
        assert trn.seq_len == tr["seq_length"]

    # -- the setup: context parallel, and ZeRO as replicated or sharded data parallel (torchtitan's own reading) ---------------
    from torchtitan.distributed.fsdp import get_fsdp_reshard_after_forward_policy
    from torchtitan.distributed.parallel_dims import ParallelDims
    cp = tr.get("context_parallel", 1)
    assert par.context_parallel_degree == cp, "--parallelism.context_parallel_degree"
    assert par.expert_parallel_degree == tr.get("expert_parallel", 1), "torchtitan runs no expert parallelism here"
    world = par.data_parallel_replicate_degree * par.data_parallel_shard_degree * cp * par.tensor_parallel_degree * P
    dims = ParallelDims.from_config(par, world)  # validates the degrees against the world size
    assert dims.dp_replicate * dims.dp_shard == dp
    if "distributed_optimizer" in tr and dp > 1:
        stage = max(int(tr.get("zero_stage", 0)), 1 if tr["distributed_optimizer"] else 0)
        if stage == 0:
            assert (dims.dp_replicate, dims.dp_shard) == (dp, 1), "ZeRO 0: data parallel replicated"
        else:
            assert (dims.dp_replicate, dims.dp_shard) == (1, dp), f"ZeRO {stage}: data parallel sharded (FSDP)"
            reshard = get_fsdp_reshard_after_forward_policy(par.fsdp_reshard_after_forward, pp_enabled=P > 1)
            assert reshard == (stage == 3), \
                f"ZeRO {stage}: FSDP must {'reshard' if stage == 3 else 'keep'} the parameters after the forward"

    # -- activation checkpointing: one mode for every block -------------------------------------------
    ac = cfg.activation_checkpoint
    want = case.decoder_parts()
    approx = bmcase.approximated(case.file("torchtitan.args"))
    if ac is None:
        done = frozenset()
    elif isinstance(ac, FullAC.Config):
        done = bmcase.FULL
    elif isinstance(ac, SelectiveAC.Config):
        pytest.fail("torchtitan's selective AC is an op-level policy (save every second matmul), not "
                    "a plan option; export none or full", pytrace=False)
    else:
        pytest.fail(f"activation_checkpoint {type(ac).__name__} is not a plan mode", pytrace=False)
    for n, w in want.items():
        if approx:
            assert bmcase.covers(done, w), f"decoder layer {n}: AC recomputes less than the plan"
        else:
            assert done == w, (f"decoder layer {n}: plan {set(w) or 'nothing'}, torchtitan applies "
                               f"{set(done) or 'nothing'} to every block (mark '{bmcase.APPROX_MARKER}')")
    for i in (0, len(case.layer_names) - 1):
        if case.roles[i] != "decoder":
            assert bmcase.option_parts(case.option_of(i)) == frozenset() or approx, \
                f"layer {i}: torchtitan checkpoints only transformer blocks"


def _load_csv_on_rank(rank, world, csv_path, P, V, M, stage_ids, schedule):
    import torch
    import torch.distributed as dist
    from torch.distributed.pipelining import PipelineStage
    from torch.distributed.pipelining.schedules import (OVERLAP_F_B, REDUCE_GRAD, RESHARD, UNSHARD,
                                                          _PipelineScheduleRuntime,
                                                          _simulate_comms_compute)

    dist.init_process_group("gloo", rank=rank, world_size=world)
    stages = [PipelineStage(torch.nn.Linear(2, 2), stage_ids[rank][v], P * V, torch.device("cpu"))
              for v in range(V)]
    sched = _PipelineScheduleRuntime(stages, n_microbatches=M, loss_fn=lambda out, target: out.sum())
    sched._load_csv(csv_path)  # validates, infers stage -> rank, lowers to comms
    order = {r: [str(a) if a is not None else "" for a in acts] for r, acts in sched.pipeline_order.items()}
    # torch's own simulator of the lowered schedule (raises on a deadlock); it does not know
    # UNSHARD/RESHARD/REDUCE_GRAD, which only matter with FSDP, so they are left out, nor
    # OVERLAP_F_B, whose sub-actions the runtime runs one after the other, so they stand for it.
    def expanded(acts):
        for a in acts:
            if a is None or a.computation_type in (UNSHARD, RESHARD, REDUCE_GRAD):
                continue
            yield from (a.sub_actions if a.computation_type == OVERLAP_F_B else (a,))
    lowered = {r: list(expanded(acts)) for r, acts in sched.pipeline_order_with_comms.items()}
    steps = _simulate_comms_compute(lowered, lambda s: sched.stage_index_to_group_rank[s], P * V)
    torch_order = None
    if schedule in TORCH_ORDER_CLASSES:
        # torch's own schedule class over the same stages: the order it would run.
        from torch.distributed.pipelining import schedules
        own = getattr(schedules, TORCH_ORDER_CLASSES[schedule])(stages, n_microbatches=M,
                                                                 loss_fn=lambda out, target: out.sum())
        torch_order = {r: [str(a) for a in acts if a is not None] for r, acts in own.pipeline_order.items()}
    dist.destroy_process_group()
    return dict(order=order, stage_to_rank=dict(sched.stage_index_to_group_rank), steps=len(steps),
                torch_order=torch_order)


@pytest.mark.parametrize("case", cases_with("schedule.csv"), indirect=True)
def test_schedule_csv(case):
    require("torch")
    P, V, M = case.P, case.V, case.M
    stage_ids = [[case.stage_at(r, v) for v in range(V)] for r in range(P)]
    res = run_ranks(_load_csv_on_rank, P, str(case.file("schedule.csv")), P, V, M, stage_ids, case.schedule)
    r0 = res[0]
    assert r0["stage_to_rank"] == {s: case.rank_of(s) for s in range(P * V)}, \
        "torch infers another stage placement from the CSV than the plan's"
    import re
    for rank in range(P):
        acts = [a for a in r0["order"][rank] if a]
        seen = {}
        for a in acts:
            # An overlapped action, (<F>;<B>)OVERLAP_F_B, runs its two sub-actions.
            over = re.fullmatch(r"\((.*);(.*)\)OVERLAP_F_B", a)
            for sub in over.groups() if over else (a,):
                m = re.fullmatch(r"(\d+)(F|B|I|W)(\d+)", sub)
                assert m, f"rank {rank}: action {sub!r} is not <stage><F|B|I|W><micro-batch>"
                s, kind, mb = int(m.group(1)), m.group(2), int(m.group(3))
                assert case.rank_of(s) == rank, f"rank {rank} runs stage {s}"
                assert 0 <= mb < M
                seen.setdefault((s, mb), []).append(kind)
        if r0["torch_order"] is not None:
            assert acts == r0["torch_order"][rank], \
                (f"rank {rank}: the CSV's order is not torch's {TORCH_ORDER_CLASSES[case.schedule]} order "
                 f"{r0['torch_order'][rank]}")
        for v in range(V):
            for mb in range(M):
                stage = case.stage_at(rank, v)
                kinds = seen.get((stage, mb), [])
                assert kinds and kinds[0] == "F", f"rank {rank}: stage {stage} mb {mb}: {kinds}"
                assert sorted(kinds) in (["B", "F"], ["F", "I", "W"]), \
                    f"rank {rank}: stage {stage} mb {mb} has {kinds}"

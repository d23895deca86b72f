"""bmpipe.torch: plans profiled from a small GPT and executed by torch.distributed.pipelining on
four CPU processes (gloo), against the same model trained without pipelining."""
import math
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

import bmpipe  # noqa: E402
import bmpipe.torch as bt  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "framework_checks"))
from distrun import run_ranks  # noqa: E402

VOCAB, WIDTH, HEADS, TOKENS, BLOCKS = 64, 32, 4, 16, 8
RANKS, MICRO_BATCHES, MBS, STEPS, LR = 4, 8, 2, 2, 0.1


class Embed(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, WIDTH)
        self.pos = nn.Parameter(torch.randn(TOKENS, WIDTH) * 0.02)

    def forward(self, idx):
        return self.tok(idx) + self.pos


class CoreAttention(nn.Module):
    def forward(self, q, k, v):
        b, t, d = q.shape
        q, k, v = (z.view(b, t, HEADS, d // HEADS).transpose(1, 2) for z in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(d // HEADS)
        mask = torch.ones(t, t, dtype=torch.bool).tril()
        y = scores.masked_fill(~mask, float("-inf")).softmax(-1) @ v
        return y.transpose(1, 2).reshape(b, t, d)


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm(WIDTH)
        self.qkv = nn.Linear(WIDTH, 3 * WIDTH)
        self.core = CoreAttention()
        self.proj = nn.Linear(WIDTH, WIDTH)

    def forward(self, x):
        q, k, v = self.qkv(self.ln(x)).chunk(3, dim=-1)
        return self.proj(self.core(q, k, v))


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm(WIDTH)
        self.fc = nn.Linear(WIDTH, 4 * WIDTH)
        self.act = nn.GELU()
        self.proj = nn.Linear(4 * WIDTH, WIDTH)

    def forward(self, x):
        return self.proj(self.act(self.fc(self.ln(x))))


class Block(nn.Module):
    bmpipe_parts = {"core_attn": "attn.core", "attn": "attn", "mlp": "mlp", "mlp_act": "mlp.act"}

    def __init__(self):
        super().__init__()
        self.attn = Attention()
        self.mlp = Mlp()

    def forward(self, x):
        x = x + self.attn(x)
        return x + self.mlp(x)


class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm(WIDTH)
        self.out = nn.Linear(WIDTH, VOCAB)

    def forward(self, x):
        return self.out(self.ln(x))


def gpt_layers():
    torch.manual_seed(0)
    return [Embed()] + [Block() for _ in range(BLOCKS)] + [Head()]


def batches():
    g = torch.Generator().manual_seed(1)
    return [(torch.randint(0, VOCAB, (MICRO_BATCHES * MBS, TOKENS), generator=g),
             torch.randint(0, VOCAB, (MICRO_BATCHES * MBS, TOKENS), generator=g)) for _ in range(STEPS)]


def loss_fn(logits, target):
    return nn.functional.cross_entropy(logits.reshape(-1, VOCAB), target.reshape(-1))


def sample():
    return torch.randint(0, VOCAB, (MBS, TOKENS), generator=torch.Generator().manual_seed(2))


def profiled(chunks, memory_bytes=10**12, schedule=None):
    schedule = schedule or ("1f1b" if chunks == 1 else "interleaved-1f1b")
    return bt.profile(gpt_layers(), sample(), ranks=RANKS, chunks=chunks, micro_batches=MICRO_BATCHES,
                      memory_bytes=memory_bytes, schedule=schedule, repeat=2, max_repeat=5, name=f"tiny-gpt-v{chunks}")


def reference():
    """Losses, first-step gradients and final parameters of the model trained without pipelining."""
    layers = gpt_layers()
    model = nn.Sequential(*layers)
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    losses, grads = [], None
    for x, y in batches():
        mb = [loss_fn(model(xi), yi) for xi, yi in zip(x.chunk(MICRO_BATCHES), y.chunk(MICRO_BATCHES))]
        loss = torch.stack(mb).mean()
        loss.backward()
        if grads is None:
            grads = [[p.grad.clone() for p in layer.parameters()] for layer in layers]
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return losses, grads, [[p.detach().clone() for p in layer.parameters()] for layer in layers]


def train_on_rank(rank, world, plan):
    """One pipeline rank: the plan's stages of the GPT, trained STEPS steps with the plan's schedule.
    Tensors come back as NumPy arrays (torch's own pickling shares memory the rank frees on exit)."""
    import torch.distributed as dist

    dist.init_process_group("gloo", rank=rank, world_size=world)
    layers = gpt_layers()
    stages = bt.pipeline_stages(plan, layers, rank, sample=batches()[0][0][:MBS])
    sched = bt.pipeline_schedule(plan, stages, loss_fn)
    mine = sorted({l.index for s in plan.stages if s.rank == rank for l in s.layers})
    params = [p for i in mine for p in layers[i].parameters()]
    opt = torch.optim.SGD(params, lr=LR)
    last = any(s.stage == len(plan.stages) - 1 for s in plan.stages if s.rank == rank)
    losses, grads = [], None
    for x, y in batches():
        mb_losses = []
        args = (x,) if rank == plan.stages[0].rank else ()
        sched.step(*args, target=y if last else None, losses=mb_losses if last else None)
        if grads is None:
            grads = {i: [p.grad.numpy().copy() for p in layers[i].parameters()] for i in mine}
        opt.step()
        opt.zero_grad()
        if last:
            losses.append(torch.stack(mb_losses).mean().item())
    modules = [st.submod for st in stages]
    dist.destroy_process_group()
    return dict(
        losses=losses, grads=grads,
        params={i: [p.detach().numpy().copy() for p in layers[i].parameters()] for i in mine},
        ops=list(modules[0].ops),
        saved={m.stage: m.saved_bytes for m in modules},
    )


def check_execution(plan):
    assert plan.fits_memory
    results = run_ranks(train_on_rank, RANKS, plan, timeout=240)
    ref_losses, ref_grads, ref_params = reference()
    losses = [l for r in results for l in r["losses"]]
    for r in results:
        for i, grads in r["grads"].items():
            for g, want in zip(grads, ref_grads[i]):
                torch.testing.assert_close(torch.from_numpy(g), want, rtol=1e-4, atol=1e-6)
        for i, params in r["params"].items():
            for p, want in zip(params, ref_params[i]):
                torch.testing.assert_close(torch.from_numpy(p), want, rtol=1e-4, atol=1e-6)
    assert losses == pytest.approx(ref_losses, rel=1e-5)
    timeline = plan.timeline()
    for rank, r in enumerate(results):
        want = [(op.kind, op.stage, op.micro_batch) for op in timeline[rank]]
        assert r["ops"][:len(want)] == want, f"rank {rank} ran another op order than the plan's"
    for s in plan.stages:
        kept = results[s.rank]["saved"][s.stage]
        assert len(kept) == STEPS * MICRO_BATCHES
        for measured in kept:
            assert measured == pytest.approx(s.saved_bytes, rel=0.05), \
                f"stage {s.stage}: keeps {measured} bytes a micro-batch, the plan says {s.saved_bytes}"
    return results


def mixed(plan, options):
    """The plan with its decoder layers' options set in turn from `options`, simulated again."""
    doc = plan.to_dict()
    k = 0
    for s in doc["stages"]:
        for layer in s["layers"]:
            if layer["name"].endswith("Block"):
                layer["option"] = options[k % len(options)]
                k += 1
    return bmpipe.Plan.from_dict(doc, plan.problem)


def test_profile_measures_what_each_option_keeps():
    pb = profiled(1)
    doc = pb.to_dict()
    assert pb.num_layers == BLOCKS + 2 and (pb.ranks, pb.chunks) == (RANKS, 1)
    block = next(l for l in doc["layers"] if l["name"].endswith("Block"))
    kept = {o["name"]: o["saved_bytes"] for o in block["options"]}
    assert set(kept) == {"none", "selective", "attn", "mlp", "mlp_act", "full"}
    # Full recomputation keeps the layer's input only, micro-batch x tokens x width floats, and the
    # generator state it replays its randomness with.
    rng = bt.checkpoint_state_bytes()
    assert rng == torch.get_rng_state().numel() > 0
    assert kept["full"] == MBS * TOKENS * WIDTH * 4 + rng
    assert kept["full"] < kept["attn"] < kept["none"] and kept["mlp"] < kept["none"]
    # Selective drops what the core attention keeps beyond its inputs, the probabilities (b x heads
    # x t x t floats) and the causal mask (t x t booleans), and keeps a generator state.
    assert kept["none"] - kept["selective"] == MBS * HEADS * TOKENS * TOKENS * 4 + TOKENS * TOKENS - rng
    for o in block["options"]:
        assert o["forward_s"] > 0 and o["recompute_s"] >= 0
    head, embed = doc["layers"][-1], doc["layers"][0]
    assert [o["name"] for o in head["options"]] == ["none"] == [o["name"] for o in embed["options"]]
    assert embed["static_bytes"] == 2 * 4 * (VOCAB * WIDTH + TOKENS * WIDTH)


def test_profile_measures_identical_layers_once_with_pinned_threads():
    before = torch.get_num_threads()
    report = bt.measure(gpt_layers(), sample(), ranks=RANKS, micro_batches=MICRO_BATCHES, memory_bytes=10**12,
                        repeat=3, max_repeat=10, budget_s=0.5)
    assert torch.get_num_threads() == before and report.threads == 1 and report.device == "cpu"
    doc = report.problem.to_dict()
    blocks = [i for i, l in enumerate(doc["layers"]) if l["name"].endswith("Block")]
    assert len(blocks) == BLOCKS
    # The first block is measured; the others are identical (class, shapes, options, input) and
    # share its measurement, so the plan sees equal layers.
    first = [m for m in report.measured if m.layer == blocks[0]]
    assert first and all(m.shared_from is None and m.repeats >= 3 for m in first)
    for i in blocks[1:]:
        mine = [m for m in report.measured if m.layer == i]
        assert all(m.shared_from == blocks[0] for m in mine)
        assert doc["layers"][i]["options"] == doc["layers"][blocks[0]]["options"]
    # Every measured time is positive (the backward is timed on its own, not as a difference) and
    # its spread reported.
    for m in report.measured:
        assert m.forward_s > 0 and m.backward_s > 0 and m.forward_spread >= 0 and m.backward_spread >= 0
    assert "shared" in str(report) and "= layer 1" in str(report)
    # The embedding and the head differ from the blocks: measured on their own.
    assert all(m.shared_from is None for m in report.measured if m.layer in (0, len(doc["layers"]) - 1))


def test_profile_flags_options_not_monotone_in_what_they_recompute():
    def m(option, recompute_ms, saved, spread=0.01):
        return bt.Measured(3, option, 1e-3, 2e-3 + recompute_ms * 1e-3, saved, 0.01, 0.01, 5,
                           recompute_s=recompute_ms * 1e-3, recompute_spread=spread)
    # Consistent: more recomputed, a longer recomputation, fewer bytes.
    ok = [m("none", 0.0, 1000), m("selective", 2.2, 700), m("attn", 2.5, 500), m("full", 3.0, 100)]
    assert bt.monotonicity_warnings(3, ok) == []
    # full measured faster than selective beyond both spreads: flagged, naming both.
    bad = [m("none", 0.0, 1000), m("selective", 2.6, 700), m("full", 2.1, 100)]
    warned = bt.monotonicity_warnings(3, bad)
    assert len(warned) == 1 and "'full' recomputes more than 'selective'" in warned[0] and "layer 3" in warned[0]
    # Within the spread: not flagged.
    noisy = [m("none", 0.0, 1000, 0.3), m("selective", 2.6, 700, 0.3), m("full", 2.1, 100, 0.3)]
    assert bt.monotonicity_warnings(3, noisy) == []
    # Bytes are exact: keeping more while recomputing more is flagged.
    kept = [m("none", 0.0, 1000), m("mlp_act", 2.1, 800), m("mlp", 2.4, 900)]
    assert any("keeps more bytes" in w for w in bt.monotonicity_warnings(3, kept))
    # Within the generator state each checkpointed region keeps: not flagged.
    assert bt.monotonicity_warnings(3, kept, state_bytes=100) == []
    # Options that do not contain each other (attention against the MLP) are not compared.
    assert bt.monotonicity_warnings(3, [m("selective", 3.0, 100), m("mlp", 2.0, 900)]) == []
    # profile warns of what it cannot vouch for: here a spread target of 0 that two runs miss.
    with pytest.warns(bt.ProfileWarning, match="spread is"):
        bt.profile(gpt_layers()[:2], sample(), ranks=2, micro_batches=2, memory_bytes=10**12, repeat=2,
                   max_repeat=2, spread=0.0, warn_spread=0.0)
    with pytest.raises(bmpipe.InvalidInputError, match="repeat"):
        bt.measure(gpt_layers(), sample(), ranks=RANKS, micro_batches=MICRO_BATCHES, memory_bytes=10**12, repeat=0)


def test_a_1f1b_plan_runs_as_planned():
    pb = profiled(1)
    free = bmpipe.plan(pb, time_limit=20)
    # Memory limits below the peak of the plan without recomputation, down to one where the best
    # plan must recompute.
    peak = max(r.peak_memory_bytes for r in free.ranks)
    for fraction in (0.9, 0.8, 0.7, 0.6, 0.5):
        plan = bmpipe.plan(profiled(1, memory_bytes=int(fraction * peak)), time_limit=20)
        if len(set(plan.options())) > 1:
            break
    assert len(set(plan.options())) > 1, "no memory limit made the plan recompute"
    check_execution(plan)


def test_an_interleaved_plan_runs_as_planned():
    plan = bmpipe.plan(profiled(2), time_limit=20)
    assert len(plan.stages) == 2 * RANKS and plan.problem.schedule == "interleaved-1f1b" and plan.problem.chunks == 2
    check_execution(mixed(plan, ["full", "none", "selective", "mlp"]))


def test_a_plan_with_every_option_runs_as_planned():
    plan = mixed(bmpipe.plan(profiled(1), time_limit=20), ["none", "selective", "attn", "mlp", "mlp_act", "full"])
    assert len(set(plan.options())) == 6
    check_execution(plan)


# Split-backward schedules: torch's runtime runs the plan's CSV with its I and W actions (and
# DualPipeV's overlapped F/B pairs, whose backward runs whole), each stage a PipelineStage whose
# backward torch splits itself; per-layer recomputation inside, every option in turn.
SPLIT = [("zb-h1", 1), ("zb-h2", 1), ("interleaved-zb", 2), ("zb-v", 2), ("dualpipev", 2)]


@pytest.mark.parametrize("schedule,chunks", SPLIT, ids=[s for s, _ in SPLIT])
def test_a_split_backward_plan_runs_as_planned(schedule, chunks):
    pb = profiled(chunks, schedule=schedule)
    doc = pb.to_dict()
    # The profile measured each layer's weight-gradient part: the plan has W ops to place.
    assert all(l["weight_grad_s"] > 0 and l["weight_grad_bytes"] > 0 for l in doc["layers"])
    plan = mixed(bmpipe.plan(pb, time_limit=20), ["full", "none", "selective", "mlp"])
    assert plan.problem.schedule == schedule and len(plan.stages) == chunks * RANKS
    kinds = {op.kind for ops in plan.timeline() for op in ops}
    assert kinds == {"F", "B", "W"}
    results = check_execution(plan)
    # W ops ran where the plan put them (check_execution compared every rank's whole order).
    assert all(any(kind == "W" for kind, _, _ in r["ops"]) for r in results)


def train_with_runtime(rank, world, plan):
    """One rank under bmpipe's own runtime (bt.PlanRuntime): its stages of the GPT (for DualPipe
    both copies' stages it holds), trained STEPS steps; every rank is given the whole batch."""
    import torch.distributed as dist

    dist.init_process_group("gloo", rank=rank, world_size=world)
    layers = gpt_layers()
    rt = bt.PlanRuntime(plan, layers, rank, loss_fn, sample=batches()[0][0][:MBS])
    params = [p for m in rt.modules.values() for p in m.parameters()]
    opt = torch.optim.SGD(params, lr=LR)
    mine = sorted({l.index for s in plan.stages if s.stage in rt.modules for l in s.layers})
    losses, grads = [], None
    for x, y in batches():
        mb_losses = {}
        rt.step(x, target=y, losses=mb_losses)
        if grads is None:
            grads = {i: [p.grad.numpy().copy() for p in layers[i].parameters()] for i in mine}
        opt.step()
        opt.zero_grad()
        losses.append({mb: loss.item() for mb, loss in mb_losses.items()})
    dist.destroy_process_group()
    return dict(
        losses=losses, grads=grads,
        params={i: [p.detach().numpy().copy() for p in layers[i].parameters()] for i in mine},
        ops=rt.ops, order=rt.order,
        saved={stage: m.saved_bytes for stage, m in rt.modules.items()},
    )


@pytest.mark.parametrize("schedule,chunks", [("dualpipe", 2), ("1f1b", 1), ("zb-v", 2)])
def test_bmpipes_own_runtime_runs_plans_torch_cannot(schedule, chunks):
    """DualPipe keeps two copies of every stage, which torch's runtime cannot place; bmpipe's own
    runtime runs it (and, as a check of the runtime, a 1F1B and a ZB-V plan) with the same proof:
    the unpipelined model's losses, gradients (both copies, summed) and parameters, the plan's op
    order on every rank, and the plan's saved bytes per stage in every micro-batch."""
    plan = mixed(bmpipe.plan(profiled(chunks, schedule=schedule), time_limit=20), ["full", "none", "selective", "mlp"])
    assert plan.fits_memory
    results = run_ranks(train_with_runtime, RANKS, plan, timeout=240)
    ref_losses, ref_grads, ref_params = reference()
    for step in range(STEPS):
        per_mb = {}
        for r in results:
            per_mb.update(r["losses"][step])
        assert sorted(per_mb) == list(range(MICRO_BATCHES))
        assert sum(per_mb.values()) / MICRO_BATCHES == pytest.approx(ref_losses[step], rel=1e-5)
    held = {}
    for rank, r in enumerate(results):
        for i, grads in r["grads"].items():
            held[i] = held.get(i, 0) + 1
            for g, want in zip(grads, ref_grads[i]):
                torch.testing.assert_close(torch.from_numpy(g), want, rtol=1e-4, atol=1e-6)
        for i, params in r["params"].items():
            for p, want in zip(params, ref_params[i]):
                torch.testing.assert_close(torch.from_numpy(p), want, rtol=1e-4, atol=1e-6)
        timeline = [(op.kind, op.stage, op.micro_batch) for op in plan.timeline()[rank]]
        assert r["order"] == timeline and r["ops"] == timeline * STEPS, f"rank {rank} ran another op order"
    # Every layer is held once, or twice under DualPipe (its two copies).
    assert set(held.values()) == ({2} if schedule == "dualpipe" else {1}) and len(held) == BLOCKS + 2
    for s in plan.stages:
        for r in results:
            for measured in r["saved"].get(s.stage, []):
                assert measured == pytest.approx(s.saved_bytes, rel=0.05), (s.stage, measured, s.saved_bytes)


def test_options_a_layer_does_not_declare_are_refused():
    with pytest.raises(bmpipe.InvalidInputError, match="declares no 'norm' part"):
        bt.apply_option(Block(), "norm")
    with pytest.raises(bmpipe.InvalidInputError, match="does not offload"):
        bt.apply_option(Block(), "selective+offload")
    assert bt.option_parts("both") == ("mlp_act", "norm")


def traced(tmp_path, option, steps=3):
    """A torch.profiler trace of `steps` training steps of the GPT with every block on `option`."""
    from torch.profiler import ProfilerActivity, profile as torch_profile

    layers = gpt_layers()
    layers = [bt.apply_option(layer, option) if isinstance(layer, Block) else layer for layer in layers]
    model = nn.Sequential(*layers)
    x, y = batches()[0]
    with bt.annotate(layers):
        with torch_profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            for k in range(steps):
                loss_fn(model(x[k * MBS:(k + 1) * MBS]), y[k * MBS:(k + 1) * MBS]).backward()
    path = tmp_path / f"trace-{option}.json"
    prof.export_chrome_trace(str(path))
    return path


def test_a_problem_from_profiler_traces_matches_the_measured_one(tmp_path):
    options = ["none", "selective", "full"]
    traces = {o: traced(tmp_path, o) for o in options}
    pb = bt.problem_from_traces(traces, ranks=RANKS, micro_batches=MICRO_BATCHES, memory_bytes=10**12)
    doc = pb.to_dict()
    measured = profiled(1).to_dict()
    assert len(doc["layers"]) == len(measured["layers"]) == BLOCKS + 2
    for got, want in zip(doc["layers"], measured["layers"]):
        assert got["static_bytes"] == want["static_bytes"]
    for got, want in zip(doc["layers"][1:-1], measured["layers"][1:-1]):  # blocks: output as large as input
        kept = {o["name"]: o["saved_bytes"] for o in got["options"]}
        saved = {o["name"]: o["saved_bytes"] for o in want["options"]}
        for o in options:
            assert kept[o] == pytest.approx(saved[o], rel=0.01), (o, kept[o], saved[o])
        opts = {o["name"]: o for o in got["options"]}
        assert all(opts[o]["forward_s"] > 0 and opts[o]["backward_s"] > 0 for o in options)
        assert opts["none"].get("recompute_s", 0) == 0
        assert opts["full"]["recompute_s"] > 0 and opts["selective"]["recompute_s"] > 0
        # Recomputing the whole layer is a forward again: more than recomputing its attention core.
        assert opts["full"]["recompute_s"] > opts["selective"]["recompute_s"]
    # The command line reads the same traces into the same problem.
    args = [f"--trace={o}={p}" for o, p in traces.items()]
    import subprocess
    from bmpipe._cli import executable
    out = subprocess.run([executable(), "profile", *args, "--ranks", str(RANKS), "--micro-batches",
                          str(MICRO_BATCHES), "--memory-gb", "1000"], capture_output=True, text=True, check=True)
    assert out.stdout == pb.to_json("profiled by bmpipe profile from PyTorch profiler traces")
    # It plans.
    assert bmpipe.plan(pb, time_limit=10).fits_memory


def test_profile_refuses_traces_it_cannot_read(tmp_path):
    bare = tmp_path / "bare.json"
    bare.write_text('{"traceEvents": []}')
    with pytest.raises(bmpipe.InvalidInputError, match="no layer annotations"):
        bt.problem_from_traces({"none": bare}, ranks=2, micro_batches=2, memory_bytes=1e9)
    with pytest.raises(bmpipe.InvalidInputError, match="unknown"):
        bt.problem_from_traces({"fulll": bare}, ranks=2, micro_batches=2, memory_bytes=1e9)

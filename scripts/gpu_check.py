"""bmpipe's accelerator check: what scripts/gpu-check.sh runs (docs/python.md, "The accelerator check").

On one device (cuda, or cpu for the parts CI runs), with a small GPT:
  1. bmpipe.torch.measure: every layer under every option (medians, spreads);
  2. torch.profiler traces of training steps under three options, read by `bmpipe profile`
     (problem_from_traces): kernel times and kept bytes beside (1)'s;
  3. a 1-rank plan of (1)'s problem, run by torch.distributed.pipelining on the device: its step
     time and peak memory (torch.cuda.max_memory_allocated / max_memory_reserved) against the
     plan's prediction;
  4. a 2-process plan where the machine allows (gloo on the CPU, NCCL with two GPUs);
and writes a short report, gpu-check.md (and gpu-check.json), of measured against predicted.

  python scripts/gpu_check.py --device cpu|cuda --out DIR
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import warnings
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

import bmpipe
import bmpipe.torch as bt

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "framework_checks"))

# The model per device: small enough for a CPU run in seconds, large enough on a GPU that kernels,
# not launches, take the time.
SIZES = {
    "cpu": dict(vocab=256, width=64, heads=4, tokens=64, blocks=4, mbs=2, micro_batches=4, dtype=torch.float32),
    "cuda": dict(vocab=32000, width=2048, heads=16, tokens=2048, blocks=8, mbs=1, micro_batches=8, dtype=torch.bfloat16),
}
OPTIONS = ("none", "selective", "full")  # traced; measure() runs every declared option


class Embed(nn.Module):
    def __init__(self, vocab, width, tokens):
        super().__init__()
        self.tok = nn.Embedding(vocab, width)
        self.pos = nn.Embedding(tokens, width)

    def forward(self, ids):
        return self.tok(ids) + self.pos(torch.arange(ids.shape[1], device=ids.device))


class CoreAttention(nn.Module):
    def __init__(self, heads):
        super().__init__()
        self.heads = heads

    def forward(self, qkv):
        b, t, three_w = qkv.shape
        q, k, v = qkv.view(b, t, 3, self.heads, three_w // 3 // self.heads).permute(2, 0, 3, 1, 4)
        return F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, three_w // 3)


class Attention(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.ln = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.core = CoreAttention(heads)
        self.proj = nn.Linear(width, width)

    def forward(self, x):
        return self.proj(self.core(self.qkv(self.ln(x))))


class Mlp(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.ln = nn.LayerNorm(width)
        self.fc = nn.Linear(width, 4 * width)
        self.act = nn.GELU()
        self.proj = nn.Linear(4 * width, width)

    def forward(self, x):
        return self.proj(self.act(self.fc(self.ln(x))))


class Block(nn.Module):
    bmpipe_parts = {"core_attn": "attn.core", "attn": "attn", "mlp": "mlp", "mlp_act": "mlp.act"}

    def __init__(self, width, heads):
        super().__init__()
        self.attn = Attention(width, heads)
        self.mlp = Mlp(width)

    def forward(self, x):
        x = x + self.attn(x)
        return x + self.mlp(x)


class Head(nn.Module):
    def __init__(self, width, vocab):
        super().__init__()
        self.ln = nn.LayerNorm(width)
        self.out = nn.Linear(width, vocab)

    def forward(self, x):
        return self.out(self.ln(x))


def model(size, device):
    torch.manual_seed(0)
    layers = [Embed(size["vocab"], size["width"], size["tokens"])]
    layers += [Block(size["width"], size["heads"]) for _ in range(size["blocks"])]
    layers += [Head(size["width"], size["vocab"])]
    return [layer.to(device=device, dtype=size["dtype"]) for layer in layers]


def batch(size, device, micro_batches):
    g = torch.Generator().manual_seed(1)
    shape = (micro_batches * size["mbs"], size["tokens"])
    return (torch.randint(0, size["vocab"], shape, generator=g).to(device),
            torch.randint(0, size["vocab"], shape, generator=g).to(device))


def loss_fn(logits, target):
    return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), target.reshape(-1))


def synchronize(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def device_memory(device) -> int:
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).total_memory
    return 64 * 2**30  # the CPU: no capacity that binds


def trace(size, device, option, out_dir, steps=3):
    """A torch.profiler trace of `steps` forward+backward micro-batches with every block on `option`."""
    from torch.profiler import ProfilerActivity, profile as torch_profile

    layers = [bt.apply_option(layer, option) if isinstance(layer, Block) else layer for layer in model(size, device)]
    seq = nn.Sequential(*layers)
    x, y = batch(size, device, steps + 1)
    mbs = size["mbs"]
    loss_fn(seq(x[:mbs]), y[:mbs]).backward()  # warm-up, outside the trace
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with bt.annotate(layers):
        with torch_profile(activities=activities, profile_memory=True) as prof:
            for k in range(1, steps + 1):
                loss_fn(seq(x[k * mbs:(k + 1) * mbs]), y[k * mbs:(k + 1) * mbs]).backward()
            synchronize(device)
    path = Path(out_dir) / f"trace-{option}.json"
    prof.export_chrome_trace(str(path))
    return path


def run_one_rank(plan, size, device, steps):
    """The plan on one rank through torch.distributed.pipelining: median step time, peak memory."""
    import torch.distributed as dist

    store = dist.HashStore()
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        layers = model(size, device)
        m = plan.problem.micro_batches
        x, y = batch(size, device, m)
        stages = bt.pipeline_stages(plan, layers, 0, sample=x[:size["mbs"]], device=device)
        sched = bt.pipeline_schedule(plan, stages, loss_fn)
        sched.step(x, target=y)  # warm-up
        synchronize(device)
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        times = []
        for _ in range(steps):
            synchronize(device)
            began = time.perf_counter()
            sched.step(x, target=y)
            synchronize(device)
            times.append(time.perf_counter() - began)
        ops = list(stages[0].submod.ops)
        out = dict(step_s=statistics.median(times), steps=steps, op_count=len(ops) // (steps + 1))
        if device.type == "cuda":
            out.update(max_allocated=torch.cuda.max_memory_allocated(device),
                       max_reserved=torch.cuda.max_memory_reserved(device))
        return out
    finally:
        dist.destroy_process_group()


def _rank_step(rank, world, plan, size, device_type, steps):
    import torch.distributed as dist

    device = torch.device(f"cuda:{rank}") if device_type == "cuda" else torch.device("cpu")
    if device_type == "cuda":
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", rank=rank, world_size=world)
    else:
        dist.init_process_group("gloo", rank=rank, world_size=world)
    layers = model(size, device)
    x, y = batch(size, device, plan.problem.micro_batches)
    stages = bt.pipeline_stages(plan, layers, rank, sample=x[:size["mbs"]], device=device)
    sched = bt.pipeline_schedule(plan, stages, loss_fn)
    last = any(s.stage == len(plan.stages) - 1 for s in plan.stages if s.rank == rank)
    first = rank == plan.stages[0].rank
    times = []
    for k in range(steps + 1):
        dist.barrier()
        synchronize(device)
        began = time.perf_counter()
        sched.step(*((x,) if first else ()), target=y if last else None)
        synchronize(device)
        if k > 0:
            times.append(time.perf_counter() - began)
    dist.destroy_process_group()
    return dict(step_s=statistics.median(times))


def run_two_ranks(plan, size, device):
    from distrun import run_ranks

    results = run_ranks(_rank_step, 2, plan, size, device.type, 3, timeout=300)
    return dict(step_s=max(r["step_s"] for r in results))


def ratio(a, b):
    return a / b if b else float("nan")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["cpu", "cuda"], required=True)
    parser.add_argument("--out", required=True, help="folder for the report and the traces")
    args = parser.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        print("gpu_check: --device cuda, but torch.cuda.is_available() is False", file=sys.stderr)
        return 2
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    device = torch.device(args.device)
    size = SIZES[args.device]
    capacity = device_memory(device)
    began = time.perf_counter()
    report = dict(device=torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
                  torch=torch.__version__, bmpipe=bmpipe.__version__, model=dict((k, str(v)) for k, v in size.items()))

    # 1. measure.
    layers = model(size, device)
    x, _ = batch(size, device, 1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        measured = bt.measure(layers, x[:size["mbs"]], ranks=1, micro_batches=size["micro_batches"],
                              memory_bytes=capacity, name="gpu-check")
    report["measure_warnings"] = measured.warnings
    problem = measured.problem
    doc = problem.to_dict()

    # 2. traces through `bmpipe profile`.
    traces = {o: trace(size, device, o, out_dir) for o in OPTIONS}
    traced = bt.problem_from_traces(traces, ranks=1, micro_batches=size["micro_batches"],
                                    memory_bytes=capacity).to_dict()
    layers_rows = []
    for i, (mine, theirs) in enumerate(zip(doc["layers"], traced["layers"])):
        got = {o["name"]: o for o in theirs["options"]}
        for o in mine["options"]:
            t = got.get(o["name"])
            if t is None:
                continue
            layers_rows.append(dict(
                layer=i, option=o["name"],
                measured_forward_s=o["forward_s"], traced_forward_s=t["forward_s"],
                measured_backward_s=o["backward_s"] + o.get("recompute_s", 0),
                traced_backward_s=t["backward_s"] + t.get("recompute_s", 0),
                measured_kept=o["saved_bytes"], traced_kept=t["saved_bytes"]))
    report["layers"] = layers_rows

    # 3. a 1-rank plan, run.
    plan = bmpipe.plan(problem, time_limit=10)
    predicted_peak = max(r.peak_memory_bytes for r in plan.ranks)
    ran = run_one_rank(plan, size, device, steps=5)
    report["one_rank"] = dict(predicted_s=plan.iteration_time_s, predicted_peak_bytes=predicted_peak,
                              options=sorted(set(plan.options())), **ran)

    # 4. two processes where the machine allows.
    if device.type == "cpu" or torch.cuda.device_count() >= 2:
        pipeline = dict(schedule="1f1b", ranks=2, chunks=1, micro_batches=size["micro_batches"])
        two = bmpipe.Problem.from_dict(dict(doc, pipeline=pipeline))
        plan2 = bmpipe.plan(two, time_limit=10)
        report["two_ranks"] = dict(predicted_s=plan2.iteration_time_s, **run_two_ranks(plan2, size, device))
    else:
        report["two_ranks"] = dict(skipped=f"{torch.cuda.device_count()} GPU: NCCL needs one GPU per process")
    report["seconds"] = time.perf_counter() - began

    (out_dir / "gpu-check.json").write_text(json.dumps(report, indent=1, default=str) + "\n")
    text = render(report)
    (out_dir / "gpu-check.md").write_text(text)
    print(text, end="")
    return 0


def render(r):
    ms = lambda s: f"{s * 1e3:.3f} ms"  # noqa: E731
    lines = [f"# bmpipe accelerator check: {r['device']}", "",
             f"torch {r['torch']}, bmpipe {r['bmpipe']}; model {r['model']}; {r['seconds']:.1f} s", "",
             "## Layers: bmpipe.torch.measure against torch.profiler traces read by `bmpipe profile`", "",
             "| layer | option | forward (measure) | forward (trace) | ratio | backward+recompute (measure) | (trace) | ratio | kept bytes (measure) | (trace) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for x in r["layers"]:
        lines.append(f"| {x['layer']} | {x['option']} | {ms(x['measured_forward_s'])} | {ms(x['traced_forward_s'])} | "
                     f"{ratio(x['traced_forward_s'], x['measured_forward_s']):.2f} | {ms(x['measured_backward_s'])} | "
                     f"{ms(x['traced_backward_s'])} | {ratio(x['traced_backward_s'], x['measured_backward_s']):.2f} | "
                     f"{x['measured_kept']} | {x['traced_kept']} |")
    o = r["one_rank"]
    lines += ["", "## One rank: the plan run by torch.distributed.pipelining", "",
              f"- options: {', '.join(o['options'])}; {o['op_count']} ops a step",
              f"- iteration: predicted {ms(o['predicted_s'])}, measured {ms(o['step_s'])} (median of {o['steps']}), "
              f"measured / predicted {ratio(o['step_s'], o['predicted_s']):.2f}",
              f"- peak memory: predicted {o['predicted_peak_bytes'] / 2**20:.1f} MiB"
              + (f", torch.cuda.max_memory_allocated {o['max_allocated'] / 2**20:.1f} MiB, max_memory_reserved "
                 f"{o['max_reserved'] / 2**20:.1f} MiB" if "max_allocated" in o else " (no device memory counters on the CPU)")]
    t = r["two_ranks"]
    lines += ["", "## Two processes", ""]
    lines.append(f"- skipped: {t['skipped']}" if "skipped" in t else
                 f"- iteration: predicted {ms(t['predicted_s'])}, measured {ms(t['step_s'])}, "
                 f"measured / predicted {ratio(t['step_s'], t['predicted_s']):.2f}")
    if r["measure_warnings"]:
        lines += ["", "## What measure could not vouch for", ""] + [f"- {w}" for w in r["measure_warnings"]]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())

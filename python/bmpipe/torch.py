"""Plans executed by torch.distributed.pipelining, and layer costs measured in PyTorch.

A model is a list of layers (nn.Module, each taking and returning one tensor), in the order of the
problem's layers. A layer whose parts can be recomputed says which submodules they are in a dict
attribute ``bmpipe_parts``: bmpipe's part names (docs/semantics.md, "Recomputation options":
core_attn, attn, mlp, mlp_act, norm, mla_up_proj) to a submodule path or a list of them, e.g.
``{"core_attn": "attn.core", "attn": "attn", "mlp": "mlp"}``. An option recomputes the parts it
names (torch.utils.checkpoint, non-reentrant); "full" recomputes the whole layer.

- ``profile(layers, sample, ...)`` measures every layer under every option (forward, backward and
  recomputation time; the bytes it keeps from forward to backward, with saved-tensor hooks) and
  returns the bmpipe.Problem to plan;
- ``pipeline_stages(plan, layers, rank)`` builds this rank's torch PipelineStages from a plan: its
  stages' layers, each with its option's checkpointing;
- ``pipeline_schedule(plan, stages, loss_fn)`` the schedule that runs the plan's op order (the
  plan's CSV export, loaded by torch's own runtime).

Bytes kept are counted as the plan counts them: each distinct storage saved for the backward
(not parameters), and the inputs a recomputed region keeps to run again.
"""
from __future__ import annotations

import contextlib
import copy
import dataclasses
import os
import statistics
import tempfile
import time
import warnings
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

import bmpipe

__all__ = [
    "PARTS",
    "option_parts",
    "apply_option",
    "SavedBytes",
    "checkpoint_state_bytes",
    "profile",
    "measure",
    "Measured",
    "ProfileReport",
    "ProfileWarning",
    "monotonicity_warnings",
    "annotate",
    "problem_from_traces",
    "StageModule",
    "pipeline_stages",
    "pipeline_schedule",
    "PlanRuntime",
]

# bmpipe's recomputation parts a layer may name in bmpipe_parts, and the option words that mean
# them (src/bmpipe/problem/recompute.h).
PARTS = ("core_attn", "attn", "mlp", "mlp_act", "norm", "mla_up_proj")
_WORDS = {
    "selective": ("core_attn",), "core_attn": ("core_attn",), "attn": ("attn",), "mlp": ("mlp",),
    "mlp_act": ("mlp_act",), "select": ("mlp_act",), "moe_act": ("mlp_act",), "norm": ("norm",),
    "layernorm": ("norm",), "select_comm": ("norm",), "both": ("mlp_act", "norm"), "moe": ("mlp",),
    "mla_up_proj": ("mla_up_proj",),
}


def option_parts(option: str) -> Tuple[str, ...]:
    """The parts an option recomputes: () for none, ("full",) for the whole layer."""
    if option == "none":
        return ()
    if option == "full":
        return ("full",)
    parts: List[str] = []
    for word in option.split("+"):
        if word == "offload":
            raise bmpipe.InvalidInputError(
                f"option '{option}': bmpipe.torch recomputes; it does not offload activations to the host")
        if word not in _WORDS:
            raise bmpipe.InvalidInputError(
                f"option '{option}': unknown part '{word}'; use none, full, or parts joined by '+': "
                f"{', '.join(sorted(_WORDS))}")
        parts.extend(p for p in _WORDS[word] if p not in parts)
    return tuple(parts)


class SavedBytes:
    """Counts the bytes autograd keeps from a forward to its backward while active: the memory of
    every tensor saved for the backward (saved-tensor hooks), the parts of a storage that several
    views share counted once, but parameters; and the inputs of the recomputed regions inside
    (which those regions keep to run again). A view counts the span of its storage it reaches (a
    micro-batch of a batch counts the micro-batch). Each recomputed region also keeps the random
    number generators' states to replay its randomness (checkpoint_state_bytes)."""

    _active: Optional["SavedBytes"] = None

    def __init__(self, parameters: Iterable[torch.Tensor] = ()):
        self._exclude = {p.untyped_storage().data_ptr() for p in parameters}
        self._spans: Dict[int, set] = {}
        self._extra = 0

    def add(self, nbytes: int) -> None:
        """Bytes kept that are no tensor saved for the backward (a checkpoint's RNG states)."""
        self._extra += nbytes

    def keep(self, t: Any) -> Any:
        if isinstance(t, torch.Tensor) and t.numel() > 0:
            ptr = t.untyped_storage().data_ptr()
            if ptr not in self._exclude:
                size = t.element_size()
                extent = 1 + sum((n - 1) * stride for n, stride in zip(t.shape, t.stride()))
                start = t.storage_offset() * size
                self._spans.setdefault(ptr, set()).add((start, start + extent * size))
        return t

    @property
    def bytes(self) -> int:
        total = self._extra
        for spans in self._spans.values():
            end = -1
            for a, b in sorted(spans):
                if b > end:
                    total += b - max(a, end)
                    end = b
        return total

    @contextlib.contextmanager
    def counting(self):
        outer, SavedBytes._active = SavedBytes._active, self
        try:
            with torch.autograd.graph.saved_tensors_hooks(self.keep, lambda t: t):
                yield self
        finally:
            SavedBytes._active = outer


def checkpoint_state_bytes(*args: Any) -> int:
    """What torch.utils.checkpoint keeps beside a region's inputs: the CPU generator's state and
    that of every accelerator the inputs are on (preserve_rng_state, its default)."""
    n = torch.get_rng_state().numel()
    devices = {a.device for a in args if isinstance(a, torch.Tensor) and a.device.type == "cuda"}
    for d in sorted(devices, key=str):
        n += torch.cuda.get_rng_state(d).numel()
    return n


class _Recomputed(nn.Module):
    """A region run under checkpointing: its inside is recomputed in the backward, its inputs kept.
    Each run of it is marked "bmpipe.region" for the profiler (inside a backward: a recomputation)."""

    def __init__(self, inner: nn.Module):
        super().__init__()
        self.inner = inner

    def _run(self, *args):
        with torch.autograd.profiler.record_function("bmpipe.region"):
            return self.inner(*args)

    def forward(self, *args):
        if SavedBytes._active is not None:
            for a in args:
                SavedBytes._active.keep(a)
            SavedBytes._active.add(checkpoint_state_bytes(*args))
        return checkpoint(self._run, *args, use_reentrant=False)


def _submodule_parent(layer: nn.Module, path: str) -> Tuple[nn.Module, str]:
    *parents, name = path.split(".")
    owner = layer
    for p in parents:
        owner = getattr(owner, p)
    if not isinstance(getattr(owner, name, None), nn.Module):
        raise bmpipe.InvalidInputError(f"bmpipe_parts: '{path}' is not a submodule of {type(layer).__name__}")
    return owner, name


def apply_option(layer: nn.Module, option: str) -> nn.Module:
    """The layer with the option's checkpointing: its parts' submodules wrapped in place (a region
    inside another one recomputed is left to the outer one), or the whole layer wrapped for
    "full". Returns the module to run (the layer itself unless "full")."""
    parts = option_parts(option)
    if parts == ("full",):
        return _Recomputed(layer)
    declared: Dict[str, Any] = getattr(layer, "bmpipe_parts", {})
    paths: List[str] = []
    for part in parts:
        if part not in declared:
            raise bmpipe.InvalidInputError(
                f"option '{option}': {type(layer).__name__} declares no '{part}' part in bmpipe_parts "
                f"(it declares {', '.join(declared) or 'none'})")
        named = declared[part]
        paths.extend([named] if isinstance(named, str) else list(named))
    outer = [p for p in paths if not any(p != q and p.startswith(q + ".") for q in paths)]
    for path in dict.fromkeys(outer):
        owner, name = _submodule_parent(layer, path)
        setattr(owner, name, _Recomputed(getattr(owner, name)))
    return layer


def _options_of(layer: nn.Module, options: Optional[Sequence[str]]) -> List[str]:
    declared = getattr(layer, "bmpipe_parts", None)
    if not declared:
        return ["none"]
    if options is not None:
        return [o for o in options if all(p == "full" or p in declared for p in option_parts(o))]
    out = ["none"]
    out += [p if p != "core_attn" else "selective" for p in PARTS if p in declared]
    return out + ["full"]


class ProfileWarning(UserWarning):
    """A measurement ``profile`` cannot vouch for: a spread above its target, or options whose
    times or bytes are not monotone in what they recompute."""


@dataclasses.dataclass
class Measured:
    """One option of one layer as ``measure`` timed it: medians of ``repeats`` timed runs after
    the warm-up, and each median's spread (the interquartile range over the median)."""

    layer: int
    option: str
    forward_s: float
    backward_s: float  # this option's whole backward, recomputation included
    saved_bytes: int
    forward_spread: float
    backward_spread: float
    repeats: int
    shared_from: Optional[int] = None  # the identical layer whose measurement this is
    # The forward of the regions the option recomputes (what its backward runs again), timed
    # inside the layer's forward; 0 for none.
    recompute_s: float = 0.0
    recompute_spread: float = 0.0
    # Split-backward schedules only, on the layer's first option: the backward's weight-gradient
    # part timed on its own, as torch's split stage runs it after the input-gradient part (its
    # median and spread).
    weight_backward_s: Optional[float] = None
    weight_backward_spread: float = 0.0


@dataclasses.dataclass
class ProfileReport:
    """What ``measure`` returns: the problem, every measurement, the thread count it ran with and
    what it could not vouch for."""

    problem: "bmpipe.Problem"
    measured: List[Measured]
    threads: int
    device: str
    warnings: List[str]

    def __str__(self) -> str:
        lines = [f"bmpipe.torch.profile on {self.device}, {self.threads} thread(s); times are medians "
                 "(spread: interquartile range / median)",
                 f"{'layer':>5}  {'option':<14} {'forward':>10} {'spread':>7} {'backward':>10} {'spread':>7} "
                 f"{'runs':>5} {'kept bytes':>12}  shared"]
        for m in self.measured:
            lines.append(f"{m.layer:>5}  {m.option:<14} {m.forward_s * 1e3:>8.3f}ms {m.forward_spread:>6.1%} "
                         f"{m.backward_s * 1e3:>8.3f}ms {m.backward_spread:>6.1%} {m.repeats:>5} "
                         f"{m.saved_bytes:>12}  {'' if m.shared_from is None else f'= layer {m.shared_from}'}")
        lines += [f"warning: {w}" for w in self.warnings]
        return "\n".join(lines)


def _synchronize(device: torch.device) -> None:
    """Waits for the device's queued work, so that a host timer measures it."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type != "cpu" and hasattr(torch, "accelerator") and torch.accelerator.is_available():
        torch.accelerator.synchronize()


def _timed_median(once: Callable[[], float], least: int, most: int, spread: float,
                  budget_s: float) -> Tuple[float, float, int]:
    """Runs ``once`` (which returns the seconds it measured) at least ``least`` times and until the
    interquartile range is within ``spread`` of the median, ``most`` runs, or ``budget_s`` seconds
    of runs; returns the median, its spread and the runs."""
    times: List[float] = []
    began = time.perf_counter()
    while True:
        times.append(once())
        if len(times) >= least:
            median = statistics.median(times)
            q = statistics.quantiles(times, n=4) if len(times) >= 2 else [median, median, median]
            rel = (q[2] - q[0]) / median if median > 0 else 0.0
            if rel <= spread or len(times) >= most or time.perf_counter() - began >= budget_s:
                return median, rel, len(times)


def _identity(layer: nn.Module, x: torch.Tensor, options: List[str]) -> Tuple[Any, ...]:
    """What makes two layers measure the same: their class and configuration (repr), parameter and
    buffer shapes and types, parts, mode, options and input. Weights' values are not compared:
    kernels run the same whatever the numbers."""
    tensors = tuple((n, tuple(t.shape), str(t.dtype), str(t.device), t.requires_grad)
                    for n, t in list(layer.named_parameters()) + list(layer.named_buffers()))
    parts = getattr(layer, "bmpipe_parts", None)
    return (type(layer).__module__, type(layer).__qualname__, repr(layer), tensors, layer.training,
            repr(sorted(parts.items())) if isinstance(parts, dict) else repr(parts), tuple(options),
            tuple(x.shape), str(x.dtype), str(x.device))


# Parts inside another part: the core attention inside the attention, the MLP's activation inside
# the MLP.
_INSIDE = {"core_attn": "attn", "mlp_act": "mlp"}


# The schedules whose plans pipeline_stages and pipeline_schedule run.
RUNNABLE_SCHEDULES = ("1f1b", "gpipe", "interleaved-1f1b", "zb-h1", "zb-h2", "interleaved-zb", "zb-v", "dualpipev")
# Schedules that split each backward into its input- and weight-gradient parts.
SPLIT_SCHEDULES = ("zb-h1", "zb-h2", "zb-v", "interleaved-zb", "dualpipe", "dualpipev")


def _weight_grad_bytes(layer: nn.Module, x: torch.Tensor) -> int:
    """What a layer's weight-gradient part holds once its input gradient is done: the inputs of
    its modules that own parameters (the weight GEMMs' inputs) and the gradients of their outputs
    (as large as the outputs), over one forward."""
    total = 0

    def hook(_module, args, out):
        nonlocal total
        for t in list(args) + [out]:
            if isinstance(t, torch.Tensor):
                total += t.numel() * t.element_size()

    handles = [m.register_forward_hook(hook) for m in layer.modules() if next(m.parameters(recurse=False), None) is not None]
    try:
        with torch.no_grad():
            layer(x)
    finally:
        for h in handles:
            h.remove()
    return total


def _covers(a: Tuple[str, ...], b: Tuple[str, ...]) -> bool:
    """Whether recomputing parts ``a`` recomputes everything ``b`` does (``full`` covers all)."""
    return "full" in a or all(p in a or _INSIDE.get(p) in a for p in b)


def monotonicity_warnings(layer: int, options: Sequence[Measured], tolerance: float = 0.0,
                          state_bytes: int = 0) -> List[str]:
    """Pairs of a layer's options where the one that recomputes more is measured with a shorter
    recomputation (beyond both spreads and ``tolerance``) or keeps more bytes (beyond ``state_bytes``,
    the generator state each checkpointed region keeps, per region): a measurement that cannot be
    right (noise, a warm-up not done, a layer that does not checkpoint what it says)."""
    out = []
    for a in options:
        for b in options:
            pa, pb = option_parts(a.option), option_parts(b.option)
            if a is b or pa == pb or not _covers(pb, pa):
                continue
            # b recomputes everything a does and more.
            noise = max(a.recompute_spread, b.recompute_spread) + tolerance
            if b.recompute_s < a.recompute_s * (1 - noise):
                out.append(f"layer {layer}: '{b.option}' recomputes more than '{a.option}' but its recomputation "
                           f"measured shorter ({b.recompute_s * 1e3:.3f} ms against {a.recompute_s * 1e3:.3f} ms, "
                           f"spreads {b.recompute_spread:.1%} and {a.recompute_spread:.1%}); measure again with more "
                           "repeats, fewer threads or a larger sample")
            if b.saved_bytes > a.saved_bytes + state_bytes * len(pb):
                out.append(f"layer {layer}: '{b.option}' recomputes more than '{a.option}' but keeps more bytes "
                           f"({b.saved_bytes} against {a.saved_bytes}); check the layer's bmpipe_parts")
    return out


def measure(
    layers: Sequence[nn.Module],
    sample: torch.Tensor,
    *,
    ranks: int,
    micro_batches: int,
    memory_bytes: int,
    chunks: int = 1,
    schedule: str = "1f1b",
    options: Optional[Sequence[str]] = None,
    optimizer_bytes_per_parameter: int = 0,
    reserved_bytes: int = 0,
    p2p_s: float = 0.0,
    repeat: int = 5,
    max_repeat: int = 50,
    spread: float = 0.05,
    warn_spread: float = 0.25,
    warmup: int = 2,
    threads: Optional[int] = None,
    budget_s: float = 2.0,
    name: str = "profiled",
) -> ProfileReport:
    """Measures every layer under every option on one micro-batch `sample` (the first layer's
    input): the problem for a pipeline of `ranks` x `chunks` stages, every measurement with its
    spread, and what the measurement cannot vouch for (a ``ProfileReport``).

    Per option: forward_s (the forward, at least none's: the same kernels run), backward_s (the
    backward of "none"), recompute_s (the forward of the regions the option recomputes, timed
    inside the layer's forward: what its backward runs again), saved_bytes (SavedBytes over the
    forward); for split-backward schedules also each layer's weight_grad_s and weight_grad_bytes.
    A layer keeps its parameters, their gradients and `optimizer_bytes_per_parameter` per
    parameter (static_bytes). Options: those given that the layer declares, else none, every
    declared part and full; layers that declare none run "none".

    Timing: `warmup` untimed steps, then the forward and the backward each timed on their own
    (the device synchronized around each), at least `repeat` runs and until the interquartile
    range is within `spread` of the median, at most `max_repeat` runs or `budget_s` seconds; the
    medians count (a spread still above `warn_spread` is warned of). Layers identical in class,
    configuration, shapes, options and input are measured once and share it. `threads` pins
    torch's intra-op threads while measuring (default: 1 on the CPU, where several threads of
    small kernels measure mostly contention; left as it is on an accelerator; 0 leaves it),
    restored afterwards. Options whose recomputation or kept bytes are not monotone in what they
    recompute are reported too (``profile`` warns of each)."""
    device = sample.device
    for layer in layers:
        for t in layer.parameters():
            device = t.device
            break
        if device.type != "cpu":
            break
    if repeat < 1 or max_repeat < repeat or warmup < 0 or spread < 0:
        raise bmpipe.InvalidInputError(
            f"profile: repeat = {repeat}, max_repeat = {max_repeat}, warmup = {warmup}, spread = {spread}: need "
            "1 <= repeat <= max_repeat, warmup >= 0 and spread >= 0")
    pinned = threads if threads is not None else (1 if device.type == "cpu" else 0)
    before = torch.get_num_threads()
    if pinned > 0:
        torch.set_num_threads(pinned)
    try:
        inputs: List[torch.Tensor] = []
        x = sample
        with torch.no_grad():
            for layer in layers:
                inputs.append(x.detach())
                x = layer(x)
        split = schedule in SPLIT_SCHEDULES
        doc_layers = []
        measured: List[Measured] = []
        warnings_out: List[str] = []
        seen: Dict[Tuple[Any, ...], int] = {}
        by_layer: Dict[int, List[Measured]] = {}
        for index, (layer, x_in) in enumerate(zip(layers, inputs)):
            params = list(layer.parameters())
            n_bytes = sum(p.numel() * p.element_size() for p in params)
            n_params = sum(p.numel() for p in params)
            layer_options = _options_of(layer, options)
            key = _identity(layer, x_in, layer_options)
            if key in seen:
                first = seen[key]
                mine = [dataclasses.replace(m, layer=index, shared_from=first) for m in by_layer[first]]
            else:
                seen[key] = index
                mine = []
                for option in layer_options:
                    trial = apply_option(copy.deepcopy(layer), option)
                    trial_params = list(trial.parameters())

                    def run_forward():
                        x = x_in.clone().requires_grad_(x_in.is_floating_point())
                        meter = SavedBytes(trial_params)
                        with meter.counting():
                            out = trial(x)
                        return out, meter.bytes

                    def time_forward() -> float:
                        _synchronize(device)
                        began = time.perf_counter()
                        out, _ = run_forward()
                        _synchronize(device)
                        took = time.perf_counter() - began
                        del out
                        return took

                    def time_backward() -> float:
                        out, _ = run_forward()
                        grad = torch.ones_like(out)
                        _synchronize(device)
                        began = time.perf_counter()
                        out.backward(grad)
                        _synchronize(device)
                        return time.perf_counter() - began

                    def time_split_backward() -> Tuple[float, float]:
                        # The backward as a split schedule's stage runs it (torch's own
                        # stage_backward_input, then stage_backward_weight): each part timed on its own.
                        from torch.distributed.pipelining._backward import stage_backward_input, stage_backward_weight

                        x = x_in.clone().requires_grad_(x_in.is_floating_point())
                        # torch detaches the stage's output in place, which a view (a linear layer's
                        # 3-D output) refuses: a copy stands for it.
                        out = trial(x).clone()
                        grad = torch.ones_like(out)
                        _synchronize(device)
                        began = time.perf_counter()
                        _, groups = stage_backward_input([out], [grad], [x], trial.parameters())
                        _synchronize(device)
                        middle = time.perf_counter()
                        stage_backward_weight(trial.parameters(), groups)
                        _synchronize(device)
                        return middle - began, time.perf_counter() - middle

                    regions = [r.inner for r in trial.modules() if isinstance(r, _Recomputed)]

                    def time_regions() -> float:
                        # The forward of every region the option recomputes, inside one forward of the
                        # layer: what its backward runs again.
                        spans: List[float] = []

                        def enter(_module, _args):
                            _synchronize(device)
                            spans.append(-time.perf_counter())

                        def leave(_module, _args, _out):
                            _synchronize(device)
                            spans[-1] += time.perf_counter()

                        handles = [h for r in regions for h in (r.register_forward_pre_hook(enter),
                                                                r.register_forward_hook(leave))]
                        try:
                            out, _ = run_forward()
                        finally:
                            for h in handles:
                                h.remove()
                        del out
                        return sum(spans)

                    def time_weight_backward() -> float:
                        return time_split_backward()[1]

                    for _ in range(max(1, warmup)):
                        time_backward()
                    out, saved = run_forward()
                    del out
                    forward_s, forward_spread, n_f = _timed_median(time_forward, repeat, max_repeat, spread, budget_s)
                    backward_s, backward_spread, n_b = _timed_median(time_backward, repeat, max_repeat, spread, budget_s)
                    m = Measured(index, option, forward_s, backward_s, saved, forward_spread, backward_spread, min(n_f, n_b))
                    if regions:
                        m.recompute_s, m.recompute_spread, _ = _timed_median(time_regions, repeat, max_repeat, spread,
                                                                             budget_s)
                    if split and not mine and trial_params:
                        m.weight_backward_s, m.weight_backward_spread, _ = _timed_median(
                            time_weight_backward, repeat, max_repeat, spread, budget_s)
                    mine.append(m)
                    for what, rel in (("forward", forward_spread), ("backward", backward_spread)):
                        if rel > warn_spread:
                            warnings_out.append(
                                f"layer {index} '{option}': the {what}'s spread is {rel:.1%} after {min(n_f, n_b)} runs "
                                f"(above {warn_spread:.0%}); its median may be off: pin threads, give a larger sample or "
                                "more max_repeat / budget_s")
                warnings_out += monotonicity_warnings(index, mine, state_bytes=checkpoint_state_bytes(x_in))
            by_layer[index] = mine
            measured += mine
            backward_none = mine[0].backward_s
            doc_layer: Dict[str, Any] = {
                "name": f"{index}:{type(layer).__name__}",
                "static_bytes": 2 * n_bytes + optimizer_bytes_per_parameter * n_params,
            }
            if split and n_params > 0:
                # The weight part of the backward (at most the whole backward, which it is part of).
                doc_layer["weight_grad_s"] = min(mine[0].weight_backward_s or 0.0, backward_none)
                doc_layer["weight_grad_bytes"] = _weight_grad_bytes(layer, x_in)
            doc_layers.append(doc_layer)
            doc_layer.update({
                # A recomputing option runs the layer's forward as none does (checkpointing adds its
                # bookkeeping): measured faster than none is noise, which a plan would exploit.
                "options": [{
                    "name": m.option,
                    "forward_s": max(m.forward_s, mine[0].forward_s),
                    "backward_s": backward_none,
                    "recompute_s": m.recompute_s,
                    "saved_bytes": m.saved_bytes,
                } for m in mine],
            })
        doc = {
            "name": name,
            "pipeline": {"ranks": ranks, "chunks": chunks, "micro_batches": micro_batches, "schedule": schedule},
            "device": {"memory_bytes": int(memory_bytes), "reserved_bytes": int(reserved_bytes)},
            "p2p_s": p2p_s,
            "layers": doc_layers,
        }
        problem = bmpipe.Problem.from_dict(doc, source=f"bmpipe.torch.profile({name})")
        return ProfileReport(problem, measured, torch.get_num_threads(), str(device), warnings_out)
    finally:
        torch.set_num_threads(before)


def profile(layers: Sequence[nn.Module], sample: torch.Tensor, **keywords: Any) -> bmpipe.Problem:
    """Measures every layer under every option on one micro-batch `sample` (the first layer's
    input) and returns the problem to plan: ``measure(...).problem`` (the keywords are
    ``measure``'s), each of its warnings issued as a ``ProfileWarning``."""
    report = measure(layers, sample, **keywords)
    for w in report.warnings:
        warnings.warn(w, ProfileWarning, stacklevel=2)
    return report.problem


@contextlib.contextmanager
def annotate(layers: Sequence[nn.Module]):
    """While active, every forward of ``layers[i]`` runs inside a profiler range named
    "bmpipe.layer <i> param_bytes <bytes> params <count>": what ``bmpipe profile`` and
    problem_from_traces read from a torch.profiler trace of training steps."""
    handles = []
    for index, layer in enumerate(layers):
        params = list(layer.parameters())
        name = (f"bmpipe.layer {index} param_bytes {sum(p.numel() * p.element_size() for p in params)} "
                f"params {sum(p.numel() for p in params)}")
        ranges: List[Any] = []

        def enter(module, args, name=name, ranges=ranges):
            r = torch.autograd.profiler.record_function(name)
            r.__enter__()
            ranges.append(r)

        def leave(module, args, output, ranges=ranges):
            ranges.pop().__exit__(None, None, None)

        handles.append(layer.register_forward_pre_hook(enter))
        # Also when the forward raises: a recomputation that checkpointing stops early does.
        handles.append(layer.register_forward_hook(leave, always_call=True))
    try:
        yield
    finally:
        for h in handles:
            h.remove()


def problem_from_traces(
    traces: Dict[str, "os.PathLike[str] | str"],
    *,
    ranks: int,
    micro_batches: int,
    memory_bytes: float,
    chunks: int = 1,
    schedule: str = "1f1b",
    reserved_bytes: float = 0,
    p2p_s: float = 0.0,
    optimizer_bytes_per_parameter: float = 0,
) -> bmpipe.Problem:
    """The problem of torch.profiler traces (export_chrome_trace, profile_memory=True) of training
    steps run under ``annotate(layers)``, one trace per recomputation option: ``{"none": path,
    "full": path}``. As ``bmpipe profile --trace none=PATH ...`` (docs/python.md, "From a trace")."""
    text, _ = bmpipe._api._run("profile", None, dict(
        traces=[f"{option}={os.fspath(path)}" for option, path in traces.items()], ranks=int(ranks), chunks=int(chunks),
        micro_batches=int(micro_batches), schedule=schedule, memory_gb=float(memory_bytes) / 1e9,
        reserved_gb=float(reserved_bytes) / 1e9, p2p_ms=float(p2p_s) * 1e3,
        optimizer_bytes_per_param=float(optimizer_bytes_per_parameter)))
    return bmpipe.Problem.from_text(text, "profiled")


class StageModule(nn.Module):
    """One stage of a plan: its layers in order, each with its option's checkpointing. It records
    the ops it runs in ``ops`` ((kind, stage, micro-batch): F when its forward starts; its
    PipelineStage adds B and W as torch's runtime calls them) and the bytes each forward keeps for
    its backward (``saved_bytes``, by micro-batch)."""

    def __init__(self, stage: int, layers: Sequence[nn.Module], log: List[Tuple[str, int, int]]):
        super().__init__()
        self.stage = stage
        self.layers = nn.Sequential(*layers)
        self.ops = log
        self.saved_bytes: List[int] = []
        self._count = {"F": 0}

    def _record(self, kind: str) -> None:
        self.ops.append((kind, self.stage, self._count[kind]))
        self._count[kind] += 1

    def forward(self, x):
        self._record("F")
        meter = SavedBytes(self.parameters())
        with meter.counting():
            out = self.layers(x)
        self.saved_bytes.append(meter.bytes)
        return out


def _stage_boundaries(plan: "bmpipe.Plan", layers: Sequence[nn.Module], sample: torch.Tensor,
                      device: torch.device) -> Dict[int, Tuple[torch.Tensor, torch.Tensor]]:
    """Each stage's input and output for one micro-batch `sample`, run without gradients: the
    shapes of what crosses its boundaries."""
    shapes: Dict[int, Tuple[torch.Tensor, torch.Tensor]] = {}
    x = sample.to(device)
    with torch.no_grad():
        for s in plan.stages:
            y = x
            for l in s.layers:
                y = layers[l.index](y)
            shapes[s.stage] = (x, y)
            x = y
    return shapes


def pipeline_stages(
    plan: "bmpipe.Plan",
    layers: Sequence[nn.Module],
    rank: int,
    *,
    sample: Optional[torch.Tensor] = None,
    device: Optional[torch.device] = None,
    group: Any = None,
) -> List["torch.distributed.pipelining.PipelineStage"]:
    """This rank's PipelineStages for `plan`, in chunk order: each a StageModule over the plan's
    layers of that stage (the model's `layers`, by index, checkpointed as the plan's options say).
    The layers are changed in place (their parts wrapped). Every stage module of the rank shares
    one op log (``stage.submod.ops``).

    `sample` (one micro-batch of the first layer's input) gives every stage its input and output
    shapes, found by running the layers once without gradients; without it, torch infers them by
    running each stage once (forward and backward) at the first step, which the op log shows."""
    from torch.distributed.pipelining import PipelineStage

    class _LoggedStage(PipelineStage):
        """A PipelineStage whose backward ops go to its module's log as torch's runtime calls them:
        B for a backward or a split backward's input-gradient part (a first stage's, whose input
        takes no gradient, computes nothing), W for a split backward's weight-gradient part."""

        def backward_one_chunk(self, bwd_chunk_id: int, loss=None, full_backward: bool = True, **kwargs: Any):
            self.submod.ops.append(("B", self.submod.stage, bwd_chunk_id))
            if full_backward and split:
                # A split plan's backward run whole (the backward of an overlapped F/B pair, as
                # DualPipeV's CSV asks): its weight part runs right after its input part.
                self.submod.ops.append(("W", self.submod.stage, bwd_chunk_id))
            return super().backward_one_chunk(bwd_chunk_id, loss=loss, full_backward=full_backward, **kwargs)

        def backward_weight_one_chunk(self, bwd_chunk_id: int, *args: Any, **kwargs: Any):
            self.submod.ops.append(("W", self.submod.stage, bwd_chunk_id))
            return super().backward_weight_one_chunk(bwd_chunk_id, *args, **kwargs)

    pb = plan.problem
    split = pb.schedule in SPLIT_SCHEDULES
    if len(layers) != pb.num_layers:
        raise bmpipe.InvalidInputError(
            f"layers: {len(layers)} modules for a problem of {pb.num_layers} layers; give one module per layer")
    if pb.schedule not in RUNNABLE_SCHEDULES:
        raise bmpipe.InvalidInputError(
            f"schedule '{pb.schedule}': torch.distributed.pipelining runs {', '.join(RUNNABLE_SCHEDULES)} plans; "
            "DualPipe holds two copies of every stage, one stage index on two ranks, which its runtime cannot "
            "express: run the plan with bmpipe.torch.PlanRuntime")
    device = device or torch.device("cpu")
    shapes = _stage_boundaries(plan, layers, sample, device) if sample is not None else {}
    log: List[Tuple[str, int, int]] = []
    out = []
    for s in sorted((s for s in plan.stages if s.rank == rank), key=lambda s: s.chunk):
        mods = [apply_option(layers[l.index], l.option) for l in s.layers]
        module = StageModule(s.stage, mods, log).to(device)
        static = {}
        if s.stage in shapes:
            # Activations between stages carry gradients (torch sends a stage's input gradient back
            # only for inputs that require one).
            x, y = (t.detach().requires_grad_(t.is_floating_point()) for t in shapes[s.stage])
            static = dict(input_args=x, output_args=y, output_grads=torch.empty_like(y),
                          input_grads=torch.empty_like(x) if x.is_floating_point() else None)
        out.append(_LoggedStage(module, s.stage, len(plan.stages), device, group=group, **static))
    if not out:
        raise bmpipe.InvalidInputError(f"rank {rank}: the plan has ranks 0..{pb.ranks - 1}")
    return out


def pipeline_schedule(plan: "bmpipe.Plan", stages: Sequence[Any], loss_fn: Callable, *, scale_grads: bool = True):
    """torch's schedule runtime over `stages`, running the plan's op order: the plan's CSV export
    (``bmpipe export --to csv``), loaded and checked by torch itself."""
    from torch.distributed.pipelining.schedules import _PipelineScheduleRuntime

    sched = _PipelineScheduleRuntime(list(stages), n_microbatches=plan.problem.micro_batches, loss_fn=loss_fn,
                                     scale_grads=scale_grads)
    fd, path = tempfile.mkstemp(suffix=".csv", prefix="bmpipe-schedule-")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(plan.export("csv"))
        sched._load_csv(path)
    finally:
        os.unlink(path)
    return sched


class PlanRuntime:
    """Runs one rank's share of any plan, DualPipe's two copies of every stage included, on
    torch.distributed's point-to-point ops: every op of the plan's timeline in its order (F, B and,
    with a split backward, W), each transfer a tagged isend/irecv between the ranks that run the
    two ops.

    It is what runs DualPipe plans, which torch.distributed.pipelining cannot (one rank per stage)
    and DeepSeek's ``dualpipe`` package runs only on CUDA. Each rank builds the stages it runs (for
    DualPipe a stage's two copies live on two ranks, each with its own parameters, initialized
    alike by the caller); after the last op the two copies' gradients are summed, so both step
    alike. The receives of a step are posted when it starts (one buffer per transfer: a boundary
    activation or its gradient per micro-batch, small beside what the stages keep), so that no
    order of the two ranks' ops can deadlock.

    ``step(x, target=, losses=)``: ``x`` the step's whole batch on a rank that runs a first stage
    (split into the plan's micro-batches along dim 0), ``target`` likewise where a last stage runs;
    ``losses`` (a dict) receives each micro-batch's loss computed here. Losses are divided by the
    micro-batch count (as torch's schedules scale gradients). ``ops`` logs what ran: (kind, stage,
    micro-batch)."""

    def __init__(self, plan: "bmpipe.Plan", layers: Sequence[nn.Module], rank: int, loss_fn: Callable, *,
                 sample: torch.Tensor, device: Optional[torch.device] = None, group: Any = None):
        import torch.distributed as dist

        pb = plan.problem
        if len(layers) != pb.num_layers:
            raise bmpipe.InvalidInputError(
                f"layers: {len(layers)} modules for a problem of {pb.num_layers} layers; give one module per layer")
        self.plan, self.rank, self.loss_fn, self.group = plan, rank, loss_fn, group
        self.device = device or torch.device("cpu")
        self.micro_batches = pb.micro_batches
        self.num_stages = len(plan.stages)
        self.split = pb.schedule in SPLIT_SCHEDULES
        timeline = plan.timeline()
        if not 0 <= rank < len(timeline):
            raise bmpipe.InvalidInputError(f"rank {rank}: the plan has ranks 0..{len(timeline) - 1}")
        self.order = [(op.kind, op.stage, op.micro_batch) for op in timeline[rank]]
        # Which rank runs each op: transfers go between them.
        self.where: Dict[Tuple[str, int, int], int] = {}
        for r, ops in enumerate(timeline):
            for op in ops:
                self.where[(op.kind, op.stage, op.micro_batch)] = r
        # The ranks holding each stage (two for DualPipe's copies).
        self.holders: Dict[int, List[int]] = {}
        for (kind, stage, _), r in self.where.items():
            if kind == "F" and r not in self.holders.setdefault(stage, []):
                self.holders[stage].append(r)
        self.shapes = _stage_boundaries(plan, layers, sample, self.device)
        self.ops: List[Tuple[str, int, int]] = []
        self.modules: Dict[int, StageModule] = {}
        for s in plan.stages:
            if rank in self.holders.get(s.stage, []):
                mods = [apply_option(layers[l.index], l.option) for l in s.layers]
                self.modules[s.stage] = StageModule(s.stage, mods, []).to(self.device)
        self._dist = dist

    def _tag(self, kind: str, stage: int, mb: int) -> int:
        # One tag per transfer: the activation into (stage, mb), or the gradient out of it.
        return ((0 if kind == "F" else 1) * self.num_stages + stage) * self.micro_batches + mb

    def step(self, x: Optional[torch.Tensor] = None, *, target: Optional[torch.Tensor] = None,
             losses: Optional[Dict[int, torch.Tensor]] = None) -> None:
        dist = self._dist
        m, last = self.micro_batches, self.num_stages - 1
        xs = list(x.to(self.device).chunk(m)) if x is not None else None
        ys = list(target.to(self.device).chunk(m)) if target is not None else None
        recvs: Dict[Tuple[str, int, int], Tuple[torch.Tensor, Any]] = {}
        for kind, stage, mb in self.order:
            if kind == "F" and stage > 0 and self.where[("F", stage - 1, mb)] != self.rank:
                buf = torch.empty_like(self.shapes[stage][0])
                recvs[(kind, stage, mb)] = (buf, dist.irecv(buf, self.where[("F", stage - 1, mb)], group=self.group,
                                                            tag=self._tag("F", stage, mb)))
            if kind == "B" and stage < last and self.where[("B", stage + 1, mb)] != self.rank:
                buf = torch.empty_like(self.shapes[stage][1])
                recvs[(kind, stage, mb)] = (buf, dist.irecv(buf, self.where[("B", stage + 1, mb)], group=self.group,
                                                            tag=self._tag("B", stage, mb)))
        sends: List[Tuple[torch.Tensor, Any]] = []
        local: Dict[Tuple[str, int, int], torch.Tensor] = {}  # transfers within this rank
        held: Dict[Tuple[int, int], Tuple[torch.Tensor, torch.Tensor]] = {}  # (stage, mb): input, output
        weight_parts: Dict[Tuple[int, int], Any] = {}  # what W still needs

        def received(key: Tuple[str, int, int]) -> torch.Tensor:
            if key in recvs:
                buf, work = recvs.pop(key)
                work.wait()
                return buf
            return local.pop(key)

        def send(t: torch.Tensor, key: Tuple[str, int, int], to: int) -> None:
            if to == self.rank:
                local[key] = t
            else:
                t = t.contiguous()
                sends.append((t, dist.isend(t, to, group=self.group, tag=self._tag(*key))))

        for kind, stage, mb in self.order:
            module = self.modules[stage]
            params = list(module.parameters())
            self.ops.append((kind, stage, mb))
            if kind == "F":
                inp = xs[mb] if stage == 0 else received(("F", stage, mb)).detach()
                inp.requires_grad_(inp.is_floating_point())
                out = module(inp)
                if stage == last:
                    loss = self.loss_fn(out, ys[mb])
                    if losses is not None:
                        losses[mb] = loss.detach()
                    out = loss / m
                else:
                    send(out.detach(), ("F", stage + 1, mb), self.where[("F", stage + 1, mb)])
                held[(stage, mb)] = (inp, out)
            elif kind == "B":
                inp, out = held[(stage, mb)]
                grad = None if stage == last else received(("B", stage, mb))
                if not self.split:
                    torch.autograd.backward([out], None if grad is None else [grad])
                    del held[(stage, mb)]
                elif inp.requires_grad:
                    from torch.distributed.pipelining._backward import stage_backward_input

                    # torch detaches the output in place, which a view refuses: a copy stands for it.
                    root = out.clone() if out._is_view() else out
                    _, groups = stage_backward_input([root], None if grad is None else [grad], [inp], iter(params))
                    weight_parts[(stage, mb)] = groups
                    del held[(stage, mb)]
                else:
                    # A first stage whose input takes no gradient: the weight part is the whole backward.
                    weight_parts[(stage, mb)] = (out, grad)
                    del held[(stage, mb)]
                if stage > 0:
                    send(inp.grad, ("B", stage - 1, mb), self.where[("B", stage - 1, mb)])
            elif kind == "W":
                part = weight_parts.pop((stage, mb))
                if isinstance(part, tuple):
                    out, grad = part
                    torch.autograd.backward([out], None if grad is None else [grad])
                else:
                    from torch.distributed.pipelining._backward import stage_backward_weight

                    stage_backward_weight(iter(params), part)
            else:
                raise bmpipe.InvalidInputError(f"op kind '{kind}': the runtime runs F, B and W")
        for _, work in sends:
            work.wait()
        self._sum_copies()

    def _sum_copies(self) -> None:
        """Each stage held by two ranks (DualPipe's copies): both end with the sum of their
        gradients."""
        dist = self._dist
        works, pending = [], []
        for stage, module in sorted(self.modules.items()):
            others = [r for r in self.holders[stage] if r != self.rank]
            if not others:
                continue
            grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in module.parameters()]
            mine = torch.cat([g.reshape(-1) for g in grads])
            theirs = torch.empty_like(mine)
            tag = 2 * self.num_stages * self.micro_batches + stage
            works.append(dist.isend(mine, others[0], group=self.group, tag=tag))
            works.append(dist.irecv(theirs, others[0], group=self.group, tag=tag))
            pending.append((module, mine, theirs))
        for w in works:
            w.wait()
        for module, mine, theirs in pending:
            total = mine + theirs
            offset = 0
            for p in module.parameters():
                n = p.numel()
                p.grad = total[offset:offset + n].view_as(p).clone()
                offset += n

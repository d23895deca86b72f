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
import os
import statistics
import tempfile
import time
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
    "annotate",
    "problem_from_traces",
    "StageModule",
    "pipeline_stages",
    "pipeline_schedule",
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


def _median_time(fn: Callable[[], Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        began = time.perf_counter()
        fn()
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def profile(
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
    repeat: int = 3,
    name: str = "profiled",
) -> bmpipe.Problem:
    """Measures every layer under every option on one micro-batch `sample` (the first layer's
    input) and returns the problem for a pipeline of `ranks` x `chunks` stages.

    Per option: forward_s (the forward), backward_s (the backward of "none"), recompute_s (what
    the option's backward takes beyond that), saved_bytes (SavedBytes over the forward). A layer
    keeps its parameters, their gradients and `optimizer_bytes_per_parameter` per parameter
    (static_bytes). Options: those given that the layer declares, else none, every declared part
    and full; layers that declare none run "none". Times are medians of `repeat` runs after one
    warm-up, on the device the layers are on."""
    inputs: List[torch.Tensor] = []
    x = sample
    with torch.no_grad():
        for layer in layers:
            inputs.append(x.detach())
            x = layer(x)
    doc_layers = []
    for index, (layer, x_in) in enumerate(zip(layers, inputs)):
        params = list(layer.parameters())
        n_bytes = sum(p.numel() * p.element_size() for p in params)
        n_params = sum(p.numel() for p in params)
        backward_none = None
        opts = []
        for option in _options_of(layer, options):
            trial = apply_option(copy.deepcopy(layer), option)
            trial_params = list(trial.parameters())

            def run_forward():
                x = x_in.clone().requires_grad_(x_in.is_floating_point())
                meter = SavedBytes(trial_params)
                with meter.counting():
                    out = trial(x)
                return out, meter.bytes

            def run_step():
                out, _ = run_forward()
                out.backward(torch.ones_like(out))

            run_step()  # warm-up
            out, saved = run_forward()
            del out
            forward_s = _median_time(run_forward, repeat)
            step_s = _median_time(run_step, repeat)
            backward_s = max(step_s - forward_s, 0.0)
            if backward_none is None:
                backward_none = backward_s
            opts.append({
                "name": option,
                "forward_s": forward_s,
                "backward_s": backward_none,
                "recompute_s": max(backward_s - backward_none, 0.0),
                "saved_bytes": saved,
            })
        doc_layers.append({
            "name": f"{index}:{type(layer).__name__}",
            "static_bytes": 2 * n_bytes + optimizer_bytes_per_parameter * n_params,
            "options": opts,
        })
    doc = {
        "name": name,
        "pipeline": {"ranks": ranks, "chunks": chunks, "micro_batches": micro_batches, "schedule": schedule},
        "device": {"memory_bytes": int(memory_bytes), "reserved_bytes": int(reserved_bytes)},
        "p2p_s": p2p_s,
        "layers": doc_layers,
    }
    return bmpipe.Problem.from_dict(doc, source=f"bmpipe.torch.profile({name})")


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


class _OnBackward(torch.autograd.Function):
    """Identity whose backward tells its stage that the stage's backward began."""

    @staticmethod
    def forward(ctx, x, stage):
        ctx.stage = stage
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        ctx.stage._record("B")
        return grad, None


class StageModule(nn.Module):
    """One stage of a plan: its layers in order, each with its option's checkpointing. It records
    the ops it runs (``ops``: (kind, stage, micro-batch), F when its forward starts, B when its
    backward does) and the bytes each forward keeps for its backward (``saved_bytes``, by
    micro-batch)."""

    def __init__(self, stage: int, layers: Sequence[nn.Module], log: List[Tuple[str, int, int]]):
        super().__init__()
        self.stage = stage
        self.layers = nn.Sequential(*layers)
        self.ops = log
        self.saved_bytes: List[int] = []
        self._count = {"F": 0, "B": 0}

    def _record(self, kind: str) -> None:
        self.ops.append((kind, self.stage, self._count[kind]))
        self._count[kind] += 1

    def forward(self, x):
        self._record("F")
        meter = SavedBytes(self.parameters())
        with meter.counting():
            out = self.layers(x)
        self.saved_bytes.append(meter.bytes)
        return _OnBackward.apply(out, self) if torch.is_grad_enabled() else out


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

    pb = plan.problem
    if len(layers) != pb.num_layers:
        raise bmpipe.InvalidInputError(
            f"layers: {len(layers)} modules for a problem of {pb.num_layers} layers; give one module per layer")
    if pb.schedule not in ("1f1b", "gpipe", "interleaved-1f1b"):
        raise bmpipe.InvalidInputError(
            f"schedule '{pb.schedule}': bmpipe.torch runs 1f1b, interleaved 1F1B and gpipe plans (split backwards "
            f"need torch's dw_builder per stage)")
    device = device or torch.device("cpu")
    shapes: Dict[int, Tuple[torch.Tensor, torch.Tensor]] = {}
    if sample is not None:
        x = sample.to(device)
        with torch.no_grad():
            for s in plan.stages:
                y = x
                for l in s.layers:
                    y = layers[l.index](y)
                shapes[s.stage] = (x, y)
                x = y
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
        out.append(PipelineStage(module, s.stage, len(plan.stages), device, group=group, **static))
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

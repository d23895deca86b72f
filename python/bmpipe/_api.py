"""Problems, plans and the commands, over the C++ core (bmpipe._core).

Documents are the command line's: a Problem reads and writes the problem file format, a Plan is
the plan file with the simulator's metrics (docs/file-formats.md), compare() and validate()
return what `compare --json` and `validate --json` print.
"""
from __future__ import annotations

import json
import os
import threading
import warnings
from dataclasses import dataclass, fields
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

from bmpipe import _core
from bmpipe._errorbase import Note

PathLike = Union[str, "os.PathLike[str]"]


@dataclass(frozen=True)
class Progress:
    """A report from long work, with the fields of the command line's ``--progress lines``.

    ``command`` is "plan", "compare" or "search"; ``phase`` what runs now; ``best_s`` the best plan's
    iteration time so far, ``bound_s`` the proven lower bound, ``gap`` (best - bound) / best,
    ``nodes`` the branch-and-bound nodes; ``done`` of ``total`` items (compare: planners). Values
    not known yet are None.
    """

    command: str
    phase: str
    elapsed_s: float
    best_s: Optional[float] = None
    bound_s: Optional[float] = None
    gap: Optional[float] = None
    nodes: Optional[int] = None
    done: Optional[int] = None
    total: Optional[int] = None


ProgressCallback = Callable[[Progress], Any]


def _progress_bridge(callback: Optional[ProgressCallback]) -> Optional[Callable[[str], None]]:
    if callback is None:
        return None

    def report(line: str) -> None:
        d = json.loads(line)
        d["command"] = d.pop("progress")
        callback(Progress(**d))

    return report


def _on_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _warn_notes(notes: Sequence[str]) -> None:
    for note in notes:
        warnings.warn(note, Note, stacklevel=3)


class Problem:
    """A planning problem: the pipeline, the device memory and every layer's options with their
    costs (docs/file-formats.md, "Problem"). Read one from a file or a dict, take the built-in
    example (bmpipe.examples), or build one with the analytic cost model (from_model)."""

    def __init__(self, handle: "_core.Problem"):
        self._handle = handle

    @classmethod
    def load(cls, path: PathLike) -> "Problem":
        """Reads a problem file (JSON or YAML). Old key names are read with a warning (bmpipe.Note)."""
        handle, notes = _core.problem_from_file(os.fspath(path))
        _warn_notes(notes)
        return cls(handle)

    @classmethod
    def from_text(cls, text: str, source: str = "<text>") -> "Problem":
        """Reads a problem file's text (JSON or YAML); `source` names it in error messages."""
        handle, notes = _core.problem_from_text(text, source)
        _warn_notes(notes)
        return cls(handle)

    @classmethod
    def from_dict(cls, doc: Dict[str, Any], source: str = "<dict>") -> "Problem":
        """Reads a problem from the dict of its JSON form (what to_dict returns)."""
        return cls.from_text(json.dumps(doc), source)

    @classmethod
    def from_model(
        cls,
        model: str,
        device: str,
        *,
        gbs: int,
        seq: int,
        tp: int = 1,
        pp: int = 1,
        dp: int = 1,
        mbs: int = 1,
        target: Optional[str] = None,
        **setup: Any,
    ) -> "Problem":
        """The analytic cost model's problem, as ``bmpipe plan --model ... --device ...`` builds it.

        `model` is a preset (bmpipe.model_presets()) or a Hugging Face config.json path; `device`
        a preset (bmpipe.device_presets()) or a device file. The setup's keys are those of the
        published runs' table (docs/python.md): vpp, cp, ep, etp, sequence_parallel,
        flash_attention, distributed_optimizer, zero, precision, fp8_params, grad_dtype,
        optimizer_dtype, tp_comm_overlap, dp_overlap, offload_optimizer, moe_capacity_factor,
        moe_imbalance, moe_dispatcher, ep_comm_overlap, moe_cuda_graphs, and recompute (a list of
        options), schedule, micro_batch_group, reserved_gb, headroom_gb, offload (a list of
        words: activations, optimizer, optimizer-moments), devices. Without recompute, the
        default options and those `target`'s settings use are offered, as on the command line.
        """
        doc = dict(setup, tp=tp, pp=pp, dp=dp, mbs=mbs, gbs=gbs, seq=seq)
        targets = [target] if target else []
        return cls(_core.problem_from_model(os.fspath(model), os.fspath(device), json.dumps(doc), targets))

    def to_json(self, description: str = "") -> str:
        """The problem file's JSON text (what ``--dump-problem`` writes)."""
        return _core.problem_json(self._handle, description)

    def to_dict(self) -> Dict[str, Any]:
        return json.loads(self.to_json())

    def save(self, path: PathLike) -> None:
        with open(path, "w", encoding="utf-8") as f:
            f.write(self.to_json())

    @property
    def name(self) -> str:
        return self._handle.name

    @property
    def num_layers(self) -> int:
        return self._handle.num_layers

    @property
    def ranks(self) -> int:
        """Pipeline ranks (p)."""
        return self._handle.ranks

    @property
    def chunks(self) -> int:
        """Model chunks per rank (v)."""
        return self._handle.chunks

    @property
    def stages(self) -> int:
        return self._handle.stages

    @property
    def micro_batches(self) -> int:
        return self._handle.micro_batches

    @property
    def schedule(self) -> str:
        return self._handle.schedule

    @property
    def memory_bytes(self) -> int:
        return self._handle.memory_bytes

    def __repr__(self) -> str:
        return (f"Problem({self.name!r}: {self.num_layers} layers, {self.ranks} ranks x {self.chunks} chunks, "
                f"{self.micro_batches} micro-batches, {self.schedule})")


def _pick(cls, d: Dict[str, Any], **extra: Any):
    known = {f.name for f in fields(cls)}
    return cls(**{k: v for k, v in d.items() if k in known and k not in extra}, **extra)


@dataclass(frozen=True)
class Layer:
    index: int
    name: str
    option: str


@dataclass(frozen=True)
class Stage:
    """A stage of the plan: its rank and chunk, its costs per micro-batch and its layers."""

    stage: int
    rank: int
    chunk: int
    forward_s: float
    backward_s: float
    recompute_s: float
    saved_bytes: int
    transient_bytes: int
    layers: Tuple[Layer, ...]


@dataclass(frozen=True)
class Rank:
    """A pipeline rank's simulated peak memory and time."""

    rank: int
    peak_memory_bytes: int
    memory_utilization: float
    static_bytes: int
    max_in_flight: int
    busy_s: float
    idle_s: float
    recompute_s: float
    update_s: float
    finish_s: float


@dataclass(frozen=True)
class Op:
    """An op of the simulated schedule: a stage's forward (F), backward (B) or weight-gradient
    part (W) of one micro-batch, with its start and end in seconds."""

    stage: int
    micro_batch: int
    kind: str
    start_s: float
    end_s: float


class Plan:
    """A plan with the simulator's metrics: the plan file (docs/file-formats.md, "Plan")."""

    def __init__(self, doc: Dict[str, Any], problem: Problem):
        self._doc = doc
        self.problem = problem
        self.stages: Tuple[Stage, ...] = tuple(
            _pick(Stage, s, layers=tuple(_pick(Layer, l) for l in s["layers"])) for s in doc["stages"]
        )
        self.ranks: Tuple[Rank, ...] = tuple(_pick(Rank, r) for r in doc["ranks"])

    @classmethod
    def from_dict(cls, doc: Dict[str, Any], problem: Problem) -> "Plan":
        """Reads a plan file's dict for `problem`; its metrics are recomputed by the simulator."""
        return cls.from_text(json.dumps(doc), problem)

    @classmethod
    def from_text(cls, text: str, problem: Problem, format: Optional[str] = None, source: str = "<text>") -> "Plan":
        """Reads a plan file, or a launcher's configuration (`format` megatron, mindformers,
        deepspeed, torchtitan, csv or json; detected when None), and simulates it."""
        out, notes = _core.read_plan(problem._handle, text, format or "", source)
        _warn_notes(notes)
        return cls(json.loads(out), problem)

    @classmethod
    def load(cls, path: PathLike, problem: Problem, format: Optional[str] = None) -> "Plan":
        with open(path, encoding="utf-8") as f:
            return cls.from_text(f.read(), problem, format, os.fspath(path))

    def to_dict(self) -> Dict[str, Any]:
        return json.loads(json.dumps(self._doc))

    def to_json(self) -> str:
        """The plan file's text, as ``bmpipe plan --json`` prints it."""
        return json.dumps(self._doc, indent=2) + "\n"

    def save(self, path: PathLike) -> None:
        with open(path, "w", encoding="utf-8") as f:
            f.write(self.to_json())

    @property
    def iteration_time_s(self) -> float:
        return self._doc["iteration_time_s"]

    @property
    def fits_memory(self) -> bool:
        return self._doc["fits_memory"]

    @property
    def bubble(self) -> Dict[str, float]:
        return dict(self._doc["bubble"])

    @property
    def solver(self) -> Optional[Dict[str, Any]]:
        s = self._doc.get("solver")
        return dict(s) if s is not None else None

    @property
    def proven_optimal(self) -> bool:
        s = self._doc.get("solver")
        return s is not None and s.get("status") == "optimal"

    @property
    def gap(self) -> Optional[float]:
        """(iteration time - proven bound) / iteration time; None when no solver ran."""
        s = self._doc.get("solver")
        return s.get("gap") if s else None

    @property
    def bound_s(self) -> Optional[float]:
        s = self._doc.get("solver")
        return s.get("bound_s") if s else None

    def options(self) -> List[str]:
        """Every layer's recomputation option, by layer index."""
        out = [""] * self.problem.num_layers
        for stage in self.stages:
            for layer in stage.layers:
                out[layer.index] = layer.option
        return out

    def timeline(self) -> List[List[Op]]:
        """Every rank's ops in its order, as simulated."""
        text = json.dumps(self._doc)
        return [[Op(*op) for op in ops] for ops in _core.timeline(self.problem._handle, text)]

    def chrome_trace(self, title: Optional[str] = None) -> str:
        """The simulated timeline as a Chrome trace (JSON text; ``--trace`` on the command line):
        a process per rank with its ops and a memory counter, for Perfetto or chrome://tracing."""
        name = title if title is not None else f"bmpipe: {self.problem.name}"
        return _core.chrome_trace(self.problem._handle, json.dumps(self._doc), name)

    def save_trace(self, path: PathLike, title: Optional[str] = None) -> None:
        with open(path, "w", encoding="utf-8") as f:
            f.write(self.chrome_trace(title))

    def export(self, to: str, *, target: Optional[str] = None) -> str:
        """The launcher configuration ``bmpipe export --to`` writes (megatron, mindformers,
        deepspeed, torchtitan, csv)."""
        return export(self.problem, self, to, target=target)

    def __repr__(self) -> str:
        status = "proven optimal" if self.proven_optimal else (
            f"gap {self.gap:.2%}" if self.gap is not None else "simulated")
        return f"Plan({self.iteration_time_s:g} s, {len(self.stages)} stages, {status})"


def _problem_or_example(problem: Optional[Problem]) -> Problem:
    if problem is None:
        return Problem(_core.builtin_example())
    if not isinstance(problem, Problem):
        raise TypeError(f"problem: expected a bmpipe.Problem, got {type(problem).__name__}")
    return problem


def plan(
    problem: Optional[Problem] = None,
    *,
    target: str = "any",
    solver: str = "bnb",
    time_limit: float = 60.0,
    node_limit: Optional[int] = None,
    progress: Optional[ProgressCallback] = None,
) -> Plan:
    """Plans `problem` (default: the built-in example) as ``bmpipe plan`` does: the stage
    partition and per-layer options that minimize the simulated iteration time with every rank
    within memory, for `target`'s framework (any, torch, megatron, megatron-local, mindformers,
    deepspeed, torchtitan). `time_limit` bounds the whole call; when it stops the search the best
    plan comes back with its gap (Plan.gap). Ctrl-C on the main thread does the same.

    Raises NoFitError when no plan fits, NoPlanError when the limit came before any plan."""
    pb = _problem_or_example(problem)
    text = _core.plan(pb._handle, target, solver, float(time_limit), -1 if node_limit is None else int(node_limit),
                      _progress_bridge(progress), _on_main_thread())
    return Plan(json.loads(text), pb)


def simulate(
    problem: Optional[Problem] = None,
    plan: Optional[Union[Plan, Dict[str, Any]]] = None,
    *,
    strategy: Optional[str] = None,
    recompute: str = "none",
) -> Plan:
    """Simulates a plan (a Plan or a plan file's dict) as ``bmpipe simulate`` does; without one,
    the strategy's plan: "even" (the default for a problem file) or "megatron" (Megatron-LM's
    default layout with `recompute` none, selective or full; needs a cost-model problem)."""
    pb = _problem_or_example(problem)
    if plan is not None and strategy is not None:
        raise _core.InvalidInputError("give plan or strategy, not both")
    text = None
    if isinstance(plan, Plan):
        text = json.dumps(plan._doc)
    elif plan is not None:
        text = json.dumps(plan)
    return Plan(json.loads(_core.simulate(pb._handle, text, strategy or "even", recompute)), pb)


def export(problem: Problem, plan: Plan, to: str, *, target: Optional[str] = None) -> str:
    """The launcher configuration ``bmpipe export --to`` writes: megatron, mindformers,
    deepspeed, torchtitan or csv (the op order for torch.distributed.pipelining)."""
    return _core.export(problem._handle, json.dumps(plan._doc), to, target or "")


def compare(
    problem: Optional[Problem] = None,
    *,
    target: str = "any",
    time_limit: float = 60.0,
    baselines: Optional[Sequence[str]] = None,
    progress: Optional[ProgressCallback] = None,
) -> Dict[str, Any]:
    """bmpipe against the baselines on one simulator, as ``bmpipe compare --json`` prints it."""
    pb = _problem_or_example(problem)
    text = _core.compare(pb._handle, target, float(time_limit), list(baselines or []), _progress_bridge(progress),
                         _on_main_thread())
    return json.loads(text)


def search(
    model: str,
    device: str,
    *,
    devices: int,
    gbs: int,
    seq: int,
    progress: Optional[ProgressCallback] = None,
    **options: Any,
) -> Dict[str, Any]:
    """The best parallel configuration of `devices` devices and its plan, as ``bmpipe search
    --json`` prints it (with "best_plan", the winner's plan file).

    Options are the command's flags with underscores: top, time_budget, threads, plan_count,
    node_limit, exhaustive, target, mfu_attention; the lists tp, pp, vpp, mbs, cp, ep, etp, zero,
    precision, schedules, recompute, offload; and the setup's switches (flash_attention,
    grad_dtype, moe_imbalance, reserved_gb, ...; docs/python.md)."""
    doc = dict(options, devices=devices, gbs=gbs, seq=seq)
    text = _core.search(os.fspath(model), os.fspath(device), json.dumps(doc), _progress_bridge(progress),
                        _on_main_thread())
    return json.loads(text)


def validate(path: Optional[PathLike] = None) -> Dict[str, Any]:
    """The cost model against published runs, as ``bmpipe validate --json`` prints it (default:
    the bundled table)."""
    return json.loads(_core.validate(os.fspath(path) if path is not None else ""))


def calibrate(runs: PathLike, fit: Sequence[str]) -> Dict[str, Any]:
    """Fits one or two efficiencies of the device preset that every run in the file `runs` is on
    to their measurements, as ``bmpipe calibrate --json`` prints it; "device_file" holds the
    device file (YAML) with the fitted values, to save and give as a model's device."""
    text, device_file = _core.calibrate(os.fspath(runs), list(fit))
    doc = json.loads(text)
    doc["device_file"] = device_file
    return doc


def model_presets() -> List[str]:
    return list(_core.model_presets())


def device_presets() -> List[str]:
    return list(_core.device_presets())

"""Problems, plans and the commands, over the C++ core (bmpipe._core).

Every command runs the command line's own code (the application layer, src/bmpipe/app): its
keywords are that command's options, read through the same table, and its results are typed
objects over the command's JSON document (to_dict() gives the document). A Problem reads and
writes the problem file format, a Plan is the plan file with the simulator's metrics
(docs/file-formats.md).
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
        gbs: Optional[int] = None,
        seq: Optional[int] = None,
        tp: Optional[int] = None,
        pp: Optional[int] = None,
        dp: Optional[int] = None,
        mbs: Optional[int] = None,
        target: Optional[str] = None,
        **setup: Any,
    ) -> "Problem":
        """The analytic cost model's problem, as ``bmpipe plan --model ... --device ...`` builds it.

        `model` is a preset (bmpipe.model_presets()) or a Hugging Face config.json path; `device`
        a preset (bmpipe.device_presets()) or a device file. The setup's keywords are the command
        line's options of the cost model (bmpipe.plan's keywords from model on, from the same
        table); a keyword left out (None) takes its default (tp, pp, dp and mbs 1), or what the
        launcher file `setup_from` states (gbs and seq are needed from one or the other). Without
        recompute, the default options and those `target`'s settings use are offered, as on the
        command line.
        """
        doc = dict(setup, model=model, device=device, tp=tp, pp=pp, dp=dp, mbs=mbs, gbs=gbs, seq=seq, target=target)
        return cls(_core.problem_from_model(json.dumps(_keywords(doc))))

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

    def __init__(self, doc: Dict[str, Any], problem: Problem, report: Optional[str] = None):
        self._doc = doc
        self.problem = problem
        #: The command line's report of the plan (``bmpipe plan`` without --json), where a command made it.
        self.report = report
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
        """Reads a plan file, or a launcher's configuration (`format`: "json" or one of
        bmpipe.formats(); detected when None), and simulates it."""
        out, _ = _run("simulate", problem, dict(plan=text, plan_format=format, plan_source=source))
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
    def not_modeled(self) -> Tuple[str, ...]:
        """What the problem's costs leave out, a sentence each (the report's `not modeled` lines)."""
        return tuple(self._doc.get("not_modeled", ()))

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
        """The launcher configuration ``bmpipe export --to`` writes (`to`: one of bmpipe.formats())."""
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


def _keywords(options: Dict[str, Any]) -> Dict[str, Any]:
    """The keywords as the command's option table reads them (paths as strings, None: not given)."""
    out = {}
    for key, value in options.items():
        if value is None:
            continue
        if isinstance(value, os.PathLike):
            value = os.fspath(value)
        elif isinstance(value, (list, tuple)):
            value = [os.fspath(v) if isinstance(v, os.PathLike) else v for v in value]
        out[key] = value
    return out


def _run(command: str, problem: Optional[Problem], options: Dict[str, Any],
         progress: Optional[ProgressCallback] = None) -> Tuple[str, Dict[str, List[str]]]:
    """Runs a command of the application layer, the command line's own code: returns its document
    and its further documents by name; warns its notes and messages."""
    text, extras, messages = _core.run(command, problem._handle if problem is not None else None,
                                       json.dumps(_keywords(options)), _progress_bridge(progress), _on_main_thread())
    documents: Dict[str, List[str]] = {}
    for name, value in extras:
        documents.setdefault(name, []).append(value)
    _warn_notes(documents.pop("note", []))
    for message in messages:
        if message.startswith("warning: "):
            warnings.warn(message[len("warning: "):], UserWarning, stacklevel=3)
        else:
            _warn_notes([message[len("note: "):] if message.startswith("note: ") else message])
    return text, documents


def _documented(command: str):
    """Appends the command's keywords (its option table) to a function's docstring."""
    def add(fn):
        fn.__doc__ = (fn.__doc__ or "") + "\n\n    Keywords (the command line's options):\n" + _core.keywords(command)
        return fn
    return add


class _Document:
    """A typed result of a command; to_dict() gives the command's JSON document. Indexing it by the
    document's keys, as the package's earlier dicts were, still works and warns (deprecated)."""

    _doc: Any

    def to_dict(self) -> Any:
        return json.loads(json.dumps(self._doc))

    def __getitem__(self, key):
        warnings.warn(f"{type(self).__name__}[{key!r}]: use its attributes, or to_dict() for the document",
                      DeprecationWarning, stacklevel=2)
        return self._doc[key]

    def __eq__(self, other) -> bool:
        return isinstance(other, type(self)) and self._doc == other._doc

    __hash__ = None


def _record(cls, doc: Dict[str, Any], **extra: Any):
    known = {f.name for f in fields(cls)}
    obj = cls(**{k: v for k, v in doc.items() if k in known and k not in extra}, **extra)
    object.__setattr__(obj, "_doc", doc)
    return obj


@dataclass(frozen=True, eq=False)
class CompareRow(_Document):
    """One planner's row of ``bmpipe compare``: its plan (None where it has none), its iteration
    time, speed-up over Megatron's best, memory and planning time."""

    name: str
    applicable: bool
    feasible: bool
    planning_time_s: float
    config: str
    status: Optional[str] = None
    iteration_time_s: Optional[float] = None
    speedup_vs_megatron: Optional[float] = None
    peak_memory_bytes: Tuple[int, ...] = ()
    memory_utilization_max: Optional[float] = None
    memory_utilization_mean: Optional[float] = None
    bubble: Optional[Dict[str, float]] = None
    plan: Optional["Plan"] = None


class Comparison(_Document, tuple):
    """The rows of ``bmpipe compare``, bmpipe's first: a tuple of CompareRow."""

    def __new__(cls, doc: List[Dict[str, Any]], problem: Problem):
        rows = [_record(CompareRow, r, peak_memory_bytes=tuple(r.get("peak_memory_bytes", ())),
                        plan=Plan(r["plan"], problem) if r.get("plan") else None) for r in doc]
        obj = tuple.__new__(cls, rows)
        obj._doc = doc
        return obj

    def __getitem__(self, key):
        return tuple.__getitem__(self, key)

    def row(self, name: str) -> CompareRow:
        """The row of the planner `name` ("bmpipe", "megatron", ...)."""
        for r in self:
            if r.name == name:
                return r
        raise KeyError(name)

    __eq__ = _Document.__eq__
    __hash__ = None


@dataclass(frozen=True, eq=False)
class SearchEntry(_Document):
    """A ranked configuration of ``bmpipe search``: its layout and its plan's metrics."""

    tp: int
    pp: int
    dp: int
    vpp: int
    micro_batch_size: int
    micro_batches: int
    cp: int
    ep: int
    etp: int
    sequence_parallel: bool
    distributed_optimizer: bool
    zero: int
    precision: str
    iteration_time_s: float
    tokens_per_s: float
    mfu: float
    bubble: float
    peak_memory_fraction: float
    mean_memory_fraction: float
    status: str
    lower_bound_s: float


@dataclass(frozen=True, eq=False)
class SearchResult(_Document):
    """``bmpipe search``: the ranking, every configuration's verdict (`configurations`, dicts), the
    statistics, the bound over the space, and the best configuration's plan (`best_plan`, a Plan of
    its problem, or None when nothing fits)."""

    target: str
    devices: int
    global_batch_size: int
    seq: int
    statistics: Dict[str, Any]
    lower_bound_s: float
    gap: float
    model_flops_per_iteration: float
    mfu_attention: str
    ranking: Tuple[SearchEntry, ...]
    configurations: Tuple[Dict[str, Any], ...]
    best_plan: Optional["Plan"] = None


@dataclass(frozen=True, eq=False)
class ErrorSummary(_Document):
    """Errors of predicted against measured values: count, mean and largest |error|, the worst run."""

    count: int
    mean_abs_error: float
    max_abs_error: float
    worst: str
    mean_error: float


@dataclass(frozen=True, eq=False)
class Validation(_Document):
    """``bmpipe validate``: the calibration per device, the error summaries (held out and fitted,
    per kind), and every run with its source, what it states, what is assumed and each
    measurement's prediction (dicts, as the command's JSON has them)."""

    table: str
    calibration: Tuple[Dict[str, Any], ...]
    held_out_time: ErrorSummary
    held_out_memory: ErrorSummary
    calibration_fit: ErrorSummary
    held_out_by_kind: Tuple[Dict[str, Any], ...]
    not_fitting: Tuple[Any, ...]
    other_frameworks_not_fitting: Tuple[Any, ...]
    runs: Tuple[Dict[str, Any], ...]


@dataclass(frozen=True, eq=False)
class CalibratedMeasurement(_Document):
    id: str
    quantity: str
    measured: float
    predicted_before: float
    predicted_after: float


@dataclass(frozen=True, eq=False)
class Calibration(_Document):
    """``bmpipe calibrate``: the fitted efficiencies against the preset's, each measurement before
    and after, and `device_file`, the device file (YAML) with the fitted values."""

    device: str
    source: str
    fitted: Dict[str, float]
    preset: Dict[str, float]
    runs: Tuple[CalibratedMeasurement, ...]
    device_file: str = ""


@_documented("plan")
def plan(problem: Optional[Problem] = None, *, progress: Optional[ProgressCallback] = None, **options: Any) -> Plan:
    """Plans `problem` (default: the built-in example) as ``bmpipe plan`` does, with the same code:
    the stage partition and per-layer options that minimize the simulated iteration time with every
    rank within memory, for `target`'s framework (one of bmpipe.targets()). `time_limit` bounds the whole call; when it stops the
    search the best plan comes back with its gap (Plan.gap). Ctrl-C on the main thread does the
    same. `progress` is called with a bmpipe.Progress as the work goes on.

    Raises NoFitError when no plan fits (the message is the command line's diagnosis), NoPlanError
    when the limit came before any plan."""
    pb = _problem_or_example(problem)
    text, documents = _run("plan", pb, options, progress)
    return Plan(json.loads(text), pb, documents["report"][0])


@_documented("simulate")
def simulate(problem: Optional[Problem] = None, plan: Optional[Union[Plan, Dict[str, Any]]] = None,
             *, strategy: Optional[str] = None, recompute: str = "none", **options: Any) -> Plan:
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
    out, documents = _run("simulate", pb, dict(options, plan=text, strategy=strategy, recompute=[recompute]))
    return Plan(json.loads(out), pb, documents["report"][0])


def export(problem: Problem, plan: Plan, to: str, *, target: Optional[str] = None) -> str:
    """The launcher configuration ``bmpipe export --to`` writes: `to` is one of bmpipe.formats()
    (csv: the op order for torch.distributed.pipelining)."""
    out, _ = _run("export", problem, dict(plan=json.dumps(plan._doc), to=to, target=target))
    return out


@_documented("compare")
def compare(problem: Optional[Problem] = None, *, progress: Optional[ProgressCallback] = None,
            **options: Any) -> Comparison:
    """bmpipe against the baselines on one simulator, as ``bmpipe compare`` runs it: a tuple of
    CompareRow, bmpipe's first (to_dict() gives what ``compare --json`` prints)."""
    pb = _problem_or_example(problem)
    text, _ = _run("compare", pb, options, progress)
    return Comparison(json.loads(text), pb)


@_documented("search")
def search(model: str, device: str, *, devices: int, gbs: int, seq: int,
           progress: Optional[ProgressCallback] = None, **options: Any) -> SearchResult:
    """The best parallel configuration of `devices` devices and its plan, as ``bmpipe search``
    finds it (to_dict() gives what ``search --json`` prints, with "best_plan")."""
    text, documents = _run("search", None, dict(options, model=model, device=device, devices=devices, gbs=gbs, seq=seq),
                           progress)
    doc = json.loads(text)
    best = None
    if doc.get("best_plan") and documents.get("best_problem"):
        best = Plan(doc["best_plan"], Problem.from_text(documents["best_problem"][0], "the best configuration"))
    return _record(SearchResult, doc, ranking=tuple(_record(SearchEntry, r) for r in doc["ranking"]),
                   configurations=tuple(doc["configurations"]), best_plan=best)


def validate(path: Optional[PathLike] = None, *, time_limit: Optional[float] = None) -> Validation:
    """The cost model against published runs, as ``bmpipe validate`` checks it (default: the
    bundled table); to_dict() gives what ``validate --json`` prints. `time_limit` bounds the fits
    (seconds, default 300): a fit that cannot end in it raises NoPlanError at once."""
    options: Dict[str, Any] = dict(table=path)
    if time_limit is not None:
        options["time_limit"] = time_limit
    text, _ = _run("validate", None, options)
    doc = json.loads(text)
    summaries = {k: _record(ErrorSummary, doc[k]) for k in ("held_out_time", "held_out_memory", "calibration_fit")}
    lists = {k: tuple(doc[k]) for k in ("calibration", "held_out_by_kind", "not_fitting", "other_frameworks_not_fitting",
                                        "runs")}
    return _record(Validation, doc, **summaries, **lists)


def calibrate(runs: PathLike, fit: Sequence[str], *, time_limit: Optional[float] = None) -> Calibration:
    """Fits one or two efficiencies of the device preset that every run in the file `runs` is on
    to their measurements, as ``bmpipe calibrate`` does; `device_file` holds the device file (YAML)
    with the fitted values, to save and give as a model's device. `time_limit` bounds the fit
    (seconds, default 300): a fit that cannot end in it raises NoPlanError at once."""
    options: Dict[str, Any] = dict(runs=runs, fit=list(fit))
    if time_limit is not None:
        options["time_limit"] = time_limit
    text, documents = _run("calibrate", None, options)
    doc = json.loads(text)
    return _record(Calibration, doc, runs=tuple(_record(CalibratedMeasurement, r) for r in doc["runs"]),
                   device_file=documents["device_file"][0])


def formats() -> List[str]:
    """The frameworks' formats: export's `to`, Plan.from_text's `format` (with "json")."""
    return list(_core.format_names())


def targets() -> List[str]:
    """The targets: the frameworks that run plans, and "any" (bmpipe's per-layer plan)."""
    return list(_core.target_names())


def model_presets() -> List[str]:
    return list(_core.model_presets())


def device_presets() -> List[str]:
    return list(_core.device_presets())

"""A golden export case: bmpipe's problem and plan, and what they mean for the frameworks.

A case is a folder tests/golden/exports/<case>/ with problem.json (or .yaml) and plan.json (or
.yaml), and the export files the case has: megatron.args, deepspeed.py, torchtitan.args,
schedule.csv, mindformers.yaml.

Layer roles follow docs/exports.md: the first layer is the embedding when its name occurs once,
the last the head likewise, the others decoder layers 0..L-1. Stage s of the plan runs on rank
s mod P as chunk s div P.

Recomputation options are read as sets of parts (bmpipe's src/bmpipe/problem/recompute.h): none -> {},
selective/core_attn -> {core_attn}, attn -> {attn}, mlp -> {mlp}, mlp_act/select -> {mlp_act} (MindFormers'
select recomputes the MLP activation), norm/select_comm/layernorm -> {layernorm}, both -> {mlp_act, layernorm},
full -> {full};
'+' joins options (selective+mlp). 'full' subsumes every other part.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from pathlib import Path

# The schedules that place stages in a V (docs/semantics.md, "Ranks, chunks and stages").
V_SCHEDULES = ("zb-v", "dualpipev")

REPO = Path(__file__).resolve().parents[2]
EXPORTS = REPO / "tests" / "golden" / "exports"

EXPORT_FILES = ("megatron.args", "deepspeed.py", "torchtitan.args", "schedule.csv", "mindformers.yaml")

# Marker line an export writes when the framework cannot express the plan's recomputation and the
# export recomputes more than the plan instead (a superset, never less).
APPROX_MARKER = "# bmpipe: recomputation approximated"

_OPTION_PARTS = {
    "none": frozenset(),
    "selective": frozenset({"core_attn"}),
    "select": frozenset({"mlp_act"}),
    "mlp_act": frozenset({"mlp_act"}),
    "attn": frozenset({"attn"}),
    "core_attn": frozenset({"core_attn"}),
    "mlp": frozenset({"mlp"}),
    "norm": frozenset({"layernorm"}),
    "layernorm": frozenset({"layernorm"}),
    "select_comm": frozenset({"layernorm"}),
    "both": frozenset({"mlp_act", "layernorm"}),
    "full": frozenset({"full"}),
    # Not a recomputation: what the option keeps goes to host memory (the offload checks read it).
    "offload": frozenset(),
}
FULL = frozenset({"full"})


def option_parts(option: str) -> frozenset:
    """The recomputed parts of a plan option name (see the module docstring)."""
    parts: set = set()
    for token in option.split("+"):
        token = token.strip()
        if token not in _OPTION_PARTS:
            raise ValueError(f"unknown recomputation option {token!r} in {option!r}; known: "
                             f"{sorted(_OPTION_PARTS)} joined with '+'")
        parts |= _OPTION_PARTS[token]
    return FULL if "full" in parts else frozenset(parts)


def covers(done: frozenset, wanted: frozenset) -> bool:
    """True when recomputing `done` recomputes at least `wanted`."""
    return done == FULL or wanted <= done


def _load(path: Path):
    text = path.read_text()
    if path.suffix in (".yaml", ".yml"):
        import yaml
        return yaml.safe_load(text)
    return json.loads(text)


def _find(folder: Path, stem: str) -> Path:
    for suffix in (".json", ".yaml", ".yml"):
        p = folder / (stem + suffix)
        if p.exists():
            return p
    raise FileNotFoundError(f"{folder}: no {stem}.json or {stem}.yaml")


@dataclass
class Stage:
    index: int          # pipeline order s
    rank: int           # s mod P
    chunk: int          # s div P
    layers: list        # problem layer indices, in order
    options: list       # plan option name per layer


@dataclass
class Case:
    name: str
    folder: Path
    problem: dict
    plan: dict
    layer_names: list = field(default_factory=list)   # expanded problem layers
    roles: list = field(default_factory=list)         # 'embedding' | 'decoder' | 'head'
    decoder_of: dict = field(default_factory=dict)    # layer index -> decoder number
    stages: list = field(default_factory=list)

    # -- shape ---------------------------------------------------------------------------------
    # The pipeline's ranks and chunks per rank, under their names or their old ones (stages,
    # virtual_stages), which problem files written before the rename carry.
    @property
    def P(self) -> int:
        pipeline = self.problem["pipeline"]
        return int(pipeline["ranks"] if "ranks" in pipeline else pipeline["stages"])

    @property
    def V(self) -> int:
        pipeline = self.problem["pipeline"]
        return int(pipeline.get("chunks", pipeline.get("virtual_stages", 1)))

    # -- placement (docs/semantics.md, "Ranks, chunks and stages"): loop, or V for zb-v and dualpipev ---
    def stage_at(self, rank: int, chunk: int) -> int:
        P = self.P
        return chunk * P + (P - 1 - rank if self.schedule in V_SCHEDULES and chunk % 2 else rank)

    def rank_of(self, s: int) -> int:
        P = self.P
        return P - 1 - s % P if self.schedule in V_SCHEDULES and (s // P) % 2 else s % P

    @property
    def M(self) -> int:
        return int(self.problem["pipeline"]["micro_batches"])

    @property
    def schedule(self) -> str:
        return str(self.problem["pipeline"].get("schedule", "1f1b"))

    @property
    def training(self) -> dict:
        return dict(self.problem.get("training") or {})

    @property
    def num_decoder(self) -> int:
        return len(self.decoder_of)

    @property
    def has_embedding(self) -> bool:
        return bool(self.roles) and self.roles[0] == "embedding"

    @property
    def has_head(self) -> bool:
        return bool(self.roles) and self.roles[-1] == "head"

    def option_of(self, layer: int) -> str:
        for st in self.stages:
            if layer in st.layers:
                return st.options[st.layers.index(layer)]
        raise KeyError(layer)

    def stage_decoders(self, s: int) -> list:
        return [self.decoder_of[i] for i in self.stages[s].layers if i in self.decoder_of]

    def decoder_parts(self) -> dict:
        """decoder number -> recomputed parts the plan wants."""
        return {self.decoder_of[i]: option_parts(self.option_of(i)) for i in self.decoder_of}

    def layer_parts(self) -> list:
        return [option_parts(self.option_of(i)) for i in range(len(self.layer_names))]

    def file(self, name: str) -> Path:
        return self.folder / name

    def has(self, name: str) -> bool:
        return (self.folder / name).exists()


def load_case(folder: Path) -> Case:
    problem = _load(_find(folder, "problem"))
    plan = _load(_find(folder, "plan"))
    case = Case(name=folder.name, folder=folder, problem=problem, plan=plan)

    names = []
    for entry in problem["layers"]:
        names += [entry["name"]] * int(entry.get("repeat", 1))
    case.layer_names = names
    n = len(names)
    roles = ["decoder"] * n
    if n >= 2 and names.count(names[0]) == 1:
        roles[0] = "embedding"
    if n >= 2 and names.count(names[-1]) == 1:
        roles[-1] = "head"
    case.roles = roles
    d = 0
    for i, r in enumerate(roles):
        if r == "decoder":
            case.decoder_of[i] = d
            d += 1

    P, V = case.P, case.V
    stages = plan["stages"]
    assert len(stages) == P * V, f"{folder}: plan has {len(stages)} stages, problem P*V = {P * V}"
    seen = []
    for s, st in enumerate(stages):
        if "rank" in st:
            assert st["rank"] == case.rank_of(s), f"{folder}: stage {s} rank {st['rank']} != {case.rank_of(s)}"
        if "chunk" in st:
            assert st["chunk"] == s // P, f"{folder}: stage {s} chunk {st['chunk']} != {s // P}"
        idx = [int(l["index"]) for l in st["layers"]]
        opts = [str(l["option"]) for l in st["layers"]]
        for l in st["layers"]:
            if "name" in l:
                assert l["name"] == names[int(l["index"])], f"{folder}: layer {l['index']} name"
        case.stages.append(Stage(index=s, rank=case.rank_of(s), chunk=s // P, layers=idx, options=opts))
        seen += idx
    assert seen == list(range(n)), f"{folder}: plan layers are not 0..{n - 1} in order"
    return case


def case_folders() -> list:
    if not EXPORTS.is_dir():
        return []
    return sorted(p for p in EXPORTS.iterdir()
                  if p.is_dir() and any((p / f"problem{s}").exists() for s in (".json", ".yaml")))


def read_arg_lines(path: Path) -> tuple[list, list]:
    """An argument file: one flag with its values per line, '#' comments. Returns (argv, lines),
    lines being the argv of each non-empty line (shlex-tokenised)."""
    argv, lines = [], []
    for raw in path.read_text().splitlines():
        toks = shlex.split(raw, comments=True)
        if toks:
            lines.append(toks)
            argv += toks
    return argv, lines


def approximated(path: Path) -> bool:
    return any(line.strip() == APPROX_MARKER for line in path.read_text().splitlines())

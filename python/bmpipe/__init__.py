"""bmpipe: the exact planner for pipeline-parallel training, from Python.

    import bmpipe
    problem = bmpipe.examples.mindformers_demo()      # or bmpipe.Problem.load("problem.yaml")
    plan = bmpipe.plan(problem, time_limit=10)        # proven optimal, or the best with its gap
    print(plan.iteration_time_s, plan.proven_optimal)
    print(plan.export("megatron"))

The package and the command line share one C++ core: the same problem gives the same plan, the
same metrics and the same errors (docs/python.md).
"""
from bmpipe import errors, examples
from bmpipe import _core
from bmpipe._api import (
    CalibratedMeasurement,
    Calibration,
    Comparison,
    CompareRow,
    ErrorSummary,
    Layer,
    Op,
    Plan,
    Problem,
    Progress,
    Rank,
    SearchEntry,
    SearchResult,
    Stage,
    Validation,
    calibrate,
    compare,
    device_presets,
    export,
    formats,
    model_presets,
    plan,
    search,
    simulate,
    targets,
    validate,
)
from bmpipe.errors import (
    Error,
    FileError,
    InternalError,
    InvalidInputError,
    NoFitError,
    NoPlanError,
    Note,
    TooLargeError,
)

__version__ = _core.version()

__all__ = [
    "Problem", "Plan", "Stage", "Layer", "Rank", "Op", "Progress",
    "Comparison", "CompareRow", "SearchResult", "SearchEntry", "Validation", "ErrorSummary", "Calibration",
    "CalibratedMeasurement",
    "plan", "simulate", "export", "compare", "search", "validate", "calibrate", "formats", "targets", "model_presets",
    "device_presets",
    "examples", "errors",
    "Error", "InvalidInputError", "FileError", "NoFitError", "NoPlanError", "TooLargeError", "InternalError", "Note",
]

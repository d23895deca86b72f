"""Shared fixtures of the framework export checks.

Nothing here skips: a framework that the venv lacks makes its tests FAIL (with how to install
it), except MindFormers, which cannot be installed on Python 3.11 (see README.md) and is checked
against its documented format instead. A case without some export file simply has no test for
that file; a tree without any case fails (test_cases.py).
"""

from __future__ import annotations

import importlib
import os
import sys
import warnings
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bmcase  # noqa: E402

# Frameworks and the versions python/requirements-frameworks.txt pins.
PINNED = {
    "torch": "2.13.0",
    "megatron.core": "0.16.1",
    "deepspeed": "0.19.8",
    "torchtitan": "0.3.0",
}
# Frameworks that cannot be installed here, with the reason; their checks use the documented format.
UNINSTALLABLE = {
    "mindformers": "mindformers==2.1.0 needs mindspore~=2.11.0, which PyPI does not have for "
                   "Python 3.11 (pip: 'No matching distribution found for mindspore~=2.11.0')",
}

os.environ.setdefault("DS_ACCELERATOR", "cpu")
os.environ.setdefault("DS_BUILD_OPS", "0")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
warnings.filterwarnings("ignore", category=UserWarning)
warnings.filterwarnings("ignore", category=DeprecationWarning)
warnings.filterwarnings("ignore", category=FutureWarning)


def require(module: str):
    """Import a framework or fail the test (never skip)."""
    try:
        mod = importlib.import_module(module)
    except Exception as e:  # ImportError and whatever a broken install raises
        pytest.fail(f"{module} cannot be imported ({type(e).__name__}: {e}); run scripts/pyenv.sh "
                    f"and use build/pyenv/bin/python (python/requirements-frameworks.txt pins it)",
                    pytrace=False)
    want = PINNED.get(module)
    if want is not None:
        got = getattr(mod, "__version__", None)
        if got is None and module == "megatron.core":
            from megatron.core import package_info
            got = package_info.__version__
        assert str(got).split("+")[0] == want, f"{module} {got} is not the pinned {want}"
    return mod


def cases_with(filename: str):
    """pytest params: every golden case that has `filename` (ids = case names)."""
    out = []
    for folder in bmcase.case_folders():
        if (folder / filename).exists():
            out.append(pytest.param(folder, id=folder.name))
    return out


@pytest.fixture
def case(request):
    return bmcase.load_case(request.param)

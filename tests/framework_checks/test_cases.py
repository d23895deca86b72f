"""The golden export cases themselves: present, readable, consistent, and only known files."""

from __future__ import annotations

import pytest

import bmcase
from conftest import PINNED, require


def test_there_are_cases():
    assert bmcase.case_folders(), f"no golden export case under {bmcase.EXPORTS}"


@pytest.mark.parametrize("folder", [pytest.param(f, id=f.name) for f in bmcase.case_folders()])
def test_case_is_consistent(folder):
    case = bmcase.load_case(folder)  # asserts plan/problem agreement
    known = {"problem.json", "problem.yaml", "plan.json", "plan.yaml", "README.md", *bmcase.EXPORT_FILES}
    extra = sorted(p.name for p in folder.iterdir() if p.name not in known)
    assert not extra, f"{folder.name}: unknown files {extra} (known: {sorted(known)})"
    assert any(case.has(f) for f in bmcase.EXPORT_FILES), f"{folder.name}: no export file"
    for i in range(len(case.layer_names)):
        bmcase.option_parts(case.option_of(i))  # every option name is understood


@pytest.mark.parametrize("module", sorted(PINNED))
def test_framework_installed(module):
    require(module)

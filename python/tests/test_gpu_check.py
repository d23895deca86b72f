"""scripts/gpu-check.sh, the prepared accelerator check: without a GPU it says so and exits 0; its
parts (the package built for the interpreter, measure against the trace round trip through
`bmpipe profile`, a 1-rank and a 2-process plan run, the report) run on the CPU device."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]


def gpu_check(*args):
    env = dict(os.environ, PYTHON=sys.executable)
    return subprocess.run(["bash", str(ROOT / "scripts" / "gpu-check.sh"), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_without_a_gpu_it_says_so_and_exits_0():
    out = gpu_check()
    assert out.returncode == 0, out.stderr
    assert "no GPU" in out.stderr and "--device cpu" in out.stderr


def test_bad_arguments_exit_2():
    assert gpu_check("--device", "tpu").returncode == 2
    assert gpu_check("--frobnicate").returncode == 2


def test_its_parts_run_on_the_cpu_and_report_measured_against_predicted(tmp_path):
    out = gpu_check("--device", "cpu", "--out", str(tmp_path))
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads((tmp_path / "gpu-check.json").read_text())
    text = (tmp_path / "gpu-check.md").read_text()
    assert out.stdout == text
    for section in ("## Layers", "## One rank", "## Two processes"):
        assert section in text
    # The trace round trip: every decoder layer under each traced option, and the bytes a block
    # keeps are the same whether measured by saved-tensor hooks or read from the trace.
    rows = report["layers"]
    blocks = {r["layer"] for r in rows if r["measured_kept"] > 100_000}
    assert len(blocks) == 4
    for r in rows:
        assert r["measured_forward_s"] > 0 and r["traced_forward_s"] > 0
        if r["layer"] in blocks:
            assert r["traced_kept"] == pytest.approx(r["measured_kept"], rel=0.01), r
    assert {r["option"] for r in rows} == {"none", "selective", "full"}
    # The plans ran: measured beside predicted.
    one, two = report["one_rank"], report["two_ranks"]
    assert one["step_s"] > 0 and one["predicted_s"] > 0 and one["op_count"] == 2 * 4
    assert one["predicted_peak_bytes"] > 0 and "max_allocated" not in one  # no device counters on the CPU
    assert two["step_s"] > 0 and two["predicted_s"] > 0
    for name in ("trace-none.json", "trace-selective.json", "trace-full.json"):
        assert (tmp_path / name).stat().st_size > 0

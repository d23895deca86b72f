"""mindformers.yaml checked against MindFormers' documented semantics.

MindFormers 2.1.0 cannot be installed on Python 3.11 (conftest.UNINSTALLABLE), so this test
re-states, without importing it, what its LayerSetting (mindformers/parallel_core/
training_graph/transformer/utils.py: __init__, _check_inputs, _check_layer_rule,
_set_select_recompute) does with the YAML keys:
  - offset: int, list of P, or V lists of P (broadcast to (V, P)); its sum before broadcasting
    must be num_layers % (P*V); stage (v, p) gets num_layers // (P*V) + offset[v][p] layers, in
    order v-major then p; middle stages need >= 1 layer, head and tail >= 0;
  - recompute / select_recompute / select_comm_recompute: bool (all or nothing), int (broadcast)
    or counts per stage (list of P, or V lists of P): layer k of a stage is recomputed by that
    kind when k < count (counted from the stage's first layer).
A stage's layer k is then: full if k < recompute, else select+select_comm (both) if below both
counts, else select or select_comm, else none; aliases: select = selective, select_comm = norm.
If MindFormers ever becomes importable in the venv, this test fails so that it gets switched to
the real LayerSetting.
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

import bmcase
from conftest import UNINSTALLABLE, cases_with


def _counts(value, P, V, num_layers):
    if value is None or value is False:
        return np.zeros((V, P), dtype=int)
    if value is True:
        return np.full((V, P), num_layers, dtype=int)
    arr = np.array(value, dtype=int)
    if arr.ndim == 0:
        return np.full((V, P), int(arr), dtype=int)
    assert arr.shape[-1] == P, f"count list {value}: last dimension must be P={P}"
    if arr.ndim == 2:
        assert arr.shape[0] == V, f"count list {value}: first dimension must be V={V}"
    return np.broadcast_to(arr, (V, P))


@pytest.mark.parametrize("case", cases_with("mindformers.yaml"), indirect=True)
def test_mindformers_yaml(case):
    assert "mindformers" in UNINSTALLABLE
    if importlib.util.find_spec("mindspore") is not None:
        pytest.fail("mindspore is importable now: check mindformers.yaml with MindFormers' own LayerSetting")
    import yaml

    doc = yaml.safe_load(case.file("mindformers.yaml").read_text())
    P, V, M, L, tr = case.P, case.V, case.M, case.num_decoder, case.training
    pc = doc["parallel_config"]
    mc = doc["model"]["model_config"]
    assert pc["pipeline_stage"] == P
    assert pc["micro_batch_num"] == M
    assert mc["num_layers"] == L
    vv = mc.get("pp_interleave_num", 1)
    assert vv == V, f"pp_interleave_num {vv} != V {V}"
    if V > 1:
        assert pc.get("pipeline_interleave", doc.get("parallel", {}).get("pipeline_config", {})
                      .get("pipeline_interleave")) in (True, None)
    if "data_parallel" in tr and "data_parallel" in pc:
        assert pc["data_parallel"] == tr["data_parallel"]
    if "tensor_parallel" in tr and "model_parallel" in pc:
        assert pc["model_parallel"] == tr["tensor_parallel"]
    if "sequence_parallel" in tr and "use_seq_parallel" in pc:
        assert bool(pc["use_seq_parallel"]) == bool(tr["sequence_parallel"])

    # -- offset -> layers per stage (LayerSetting._check_inputs / layer_list) -----------------------
    offset = np.array(mc.get("offset", 0), dtype=int)
    total = P * V
    if offset.ndim >= 1:
        assert offset.shape[-1] == P, f"offset {offset.tolist()}: last dimension must be P={P}"
    if offset.ndim >= 2:
        assert offset.shape[-2] == V, f"offset {offset.tolist()}: must have V={V} rows"
    assert offset.sum() == L % total, f"offset sums to {offset.sum()}, MindFormers wants {L} % {total} = {L % total}"
    counts = (np.broadcast_to(offset, (V, P)) + L // total).flatten()  # stage order v-major, p
    assert counts[0] >= 0 and counts[-1] >= 0
    assert total <= 2 or (counts[1:-1] >= 1).all(), "middle stages need at least one layer"
    want = [len(case.stage_decoders(s)) for s in range(total)]
    assert counts.tolist() == want, f"MindFormers stage layer counts {counts.tolist()}, plan {want}"

    # -- recompute counts ------------------------------------------------------------------------
    rc = doc.get("recompute_config", {})
    full = _counts(rc.get("recompute"), P, V, L)
    sel = _counts(rc.get("select_recompute"), P, V, L)
    comm = _counts(rc.get("select_comm_recompute"), P, V, L)
    approx = bmcase.approximated(case.file("mindformers.yaml"))
    for s in range(total):
        p, v = s % P, s // P
        for k, d in enumerate(case.stage_decoders(s)):
            if k < full[v][p]:
                done = bmcase.FULL
            else:
                done = frozenset(({"mlp_act"} if k < sel[v][p] else set()) |
                                 ({"layernorm"} if k < comm[v][p] else set()))
            plan = case.decoder_parts()[d]
            if approx:
                assert bmcase.covers(done, plan), f"stage {s} layer {k}: recomputes less than the plan"
            else:
                assert done == plan, (f"stage {s} (rank {p}, chunk {v}) layer {k} (decoder {d}): plan "
                                      f"{set(plan) or 'nothing'}, MindFormers {set(done) or 'nothing'}")
    for i in (0, len(case.layer_names) - 1):
        if case.roles[i] != "decoder":
            assert bmcase.option_parts(case.option_of(i)) == frozenset() or approx, \
                f"layer {i}: MindFormers recomputes only decoder layers"

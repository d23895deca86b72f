"""The Python package against the command line: the same problem gives the same plan, metrics,
exports and errors; plus what only the package has (progress callbacks, the GIL released)."""
import json
import re
import signal
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import pytest

import bmpipe
from bmpipe._cli import executable

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "mindformers-demo"


def cli(*args, check=True):
    """Runs the command-line program shipped in the package; returns (exit code, stdout, stderr)."""
    r = subprocess.run([executable(), *map(str, args)], capture_output=True, text=True, timeout=300)
    if check and r.returncode != 0:
        raise AssertionError(f"bmpipe {' '.join(map(str, args))} exited {r.returncode}: {r.stderr}")
    return r.returncode, r.stdout, r.stderr


def without_seconds(doc):
    """The document without wall-clock fields (solver seconds), which differ run to run."""
    if isinstance(doc, dict):
        return {k: without_seconds(v) for k, v in doc.items() if k not in ("seconds", "planning_time_s")}
    if isinstance(doc, list):
        return [without_seconds(v) for v in doc]
    return doc


def test_the_readme_one_liner_prints_the_demo_optimum():
    out = subprocess.run(
        [sys.executable, "-c",
         "import bmpipe; print(bmpipe.plan(bmpipe.examples.mindformers_demo()).iteration_time_s)"],
        capture_output=True, text=True, check=True, cwd="/")
    assert out.stdout == "54.81\n"


def test_demo_plan_is_proven_and_equals_the_command_line():
    plan = bmpipe.plan(bmpipe.examples.mindformers_demo())
    assert plan.proven_optimal and plan.gap == 0
    assert plan.iteration_time_s == 54.81
    assert len(plan.stages) == 16 and len(plan.ranks) == 16
    assert all(r.peak_memory_bytes <= 56e9 for r in plan.ranks)
    _, out, _ = cli("plan", "--json", "--progress", "none")
    assert without_seconds(plan.to_dict()) == without_seconds(json.loads(out))


@pytest.mark.parametrize("problem", ["problem.yaml", "problem-vpp3.yaml"])
def test_plan_with_a_node_limit_equals_the_command_line(problem):
    pb = bmpipe.Problem.load(DEMO / problem)
    plan = bmpipe.plan(pb, node_limit=0)
    _, out, _ = cli("plan", "--problem", DEMO / problem, "--node-limit", 0, "--json", "--progress", "none")
    assert without_seconds(plan.to_dict()) == without_seconds(json.loads(out))
    assert plan.options() == [layer["option"] for s in json.loads(out)["stages"] for layer in s["layers"]]


def test_simulate_and_export_equal_the_command_line(tmp_path):
    pb = bmpipe.Problem.load(DEMO / "problem.yaml")
    plan = bmpipe.plan(pb)
    path = tmp_path / "plan.json"
    plan.save(path)
    again = bmpipe.simulate(pb, plan)
    _, out, _ = cli("simulate", "--problem", DEMO / "problem.yaml", "--plan", path, "--json")
    assert again.to_dict() == json.loads(out)
    assert again.iteration_time_s == plan.iteration_time_s and again.solver["status"] == "optimal"
    even = bmpipe.simulate(pb)
    _, out, _ = cli("simulate", "--problem", DEMO / "problem.yaml", "--json")
    assert even.to_dict() == json.loads(out)
    for to in ["megatron", "mindformers", "deepspeed", "torchtitan", "csv"]:
        _, out, _ = cli("export", "--problem", DEMO / "problem.yaml", "--plan", path, "--to", to)
        assert plan.export(to) == out, to
    # The plan file reads back into the same plan; a launcher's configuration into the same stages.
    assert bmpipe.Plan.from_text(plan.to_json(), pb).to_dict() == plan.to_dict()
    with warnings.catch_warnings(record=True) as notes:
        warnings.simplefilter("always")
        back = bmpipe.Plan.from_text(plan.export("megatron"), pb)
    assert any(n.category is bmpipe.Note and "not read" in str(n.message) for n in notes)
    assert [[l.index for l in s.layers] for s in back.stages] == [[l.index for l in s.layers] for s in plan.stages]


def test_problem_round_trips_through_dicts_and_files(tmp_path):
    pb = bmpipe.Problem.load(DEMO / "problem.yaml")
    again = bmpipe.Problem.from_dict(pb.to_dict())
    assert again.to_json() == pb.to_json()
    pb.save(tmp_path / "p.json")
    assert bmpipe.Problem.load(tmp_path / "p.json").to_json() == pb.to_json()
    assert (pb.num_layers, pb.ranks, pb.chunks, pb.micro_batches, pb.schedule) == (98, 16, 1, 16, "1f1b")


def test_cost_model_problem_equals_the_command_lines(tmp_path):
    pb = bmpipe.Problem.from_model("llama3-8b", "h100-80gb", tp=2, pp=4, dp=1, gbs=32, seq=4096,
                                   flash_attention=True, sequence_parallel=True, vpp=2, target="megatron")
    dump = tmp_path / "p.json"
    cli("plan", "--model", "llama3-8b", "--device", "h100-80gb", "--tp", 2, "--pp", 4, "--dp", 1, "--gbs", 32,
        "--seq", 4096, "--flash-attn", "--sequence-parallel", "--vpp", 2, "--target", "megatron",
        "--dump-problem", dump, "--node-limit", 0, "--progress", "none")
    assert pb.to_dict() == json.loads(dump.read_text())
    assert (pb.ranks, pb.chunks) == (4, 2)


def test_setup_from_a_megatron_launch_equals_the_command_line(tmp_path):
    """The setup of a Megatron-LM launch file; the keywords given win over it, as on the command line."""
    args = ROOT / "tests/golden/exports/llama3-70b-fp8-megatron/megatron.args"
    pb = bmpipe.Problem.from_model("llama3-70b", "h100-80gb", dp=8, setup_from=args)
    dump = tmp_path / "p.json"
    cli("plan", "--model", "llama3-70b", "--device", "h100-80gb", "--dp", 8, "--setup-from", args,
        "--dump-problem", dump, "--node-limit", 0, "--progress", "none")
    assert pb.to_dict() == json.loads(dump.read_text())
    training = pb.to_dict()["training"]
    assert (training["tensor_parallel"], training["precision"], training["fp8_recipe"]) == (8, "fp8", "tensorwise")
    assert bmpipe.Problem.from_model("llama3-70b", "h100-80gb", dp=8, tp=4,
                                     setup_from=args).to_dict()["training"]["tensor_parallel"] == 4


def test_what_the_costs_leave_out_comes_with_the_plan():
    pb = bmpipe.Problem.from_model("gpt-oss-120b", "h100-80gb", pp=4, dp=8, ep=8, gbs=64, seq=4096,
                                   flash_attention=True, distributed_optimizer=True)
    plan = bmpipe.plan(pb, time_limit=20)
    assert len(plan.not_modeled) == 1 and "Attention sinks" in plan.not_modeled[0]
    assert plan.to_dict()["not_modeled"] == list(plan.not_modeled)
    assert bmpipe.plan(bmpipe.Problem.load(DEMO / "problem.yaml"), time_limit=20).not_modeled == ()


def test_hybrid_nvfp4_and_routing_keywords_equal_the_command_lines(tmp_path):
    """A hybrid stack in NVFP4 on Blackwell with forced-balance routing, as the command line builds it."""
    setup = dict(pp=4, dp=8, ep=8, gbs=64, seq=8192, flash_attention=True, distributed_optimizer=True,
                 precision="nvfp4", moe_routing="balanced")
    pb = bmpipe.Problem.from_model("nemotron-3-nano-30b-a3b", "gb200", **setup)
    dump = tmp_path / "p.json"
    cli("plan", "--model", "nemotron-3-nano-30b-a3b", "--device", "gb200", "--pp", 4, "--dp", 8, "--ep", 8,
        "--gbs", 64, "--seq", 8192, "--flash-attn", "--distributed-optimizer", "--precision", "nvfp4",
        "--moe-routing", "balanced", "--dump-problem", dump, "--node-limit", 0, "--progress", "none")
    assert pb.to_dict() == json.loads(dump.read_text())
    training = pb.to_dict()["training"]
    assert training["precision"] == "nvfp4" and training["linear_mixers"] == ["mamba2"]
    natural = bmpipe.Problem.from_model("nemotron-3-nano-30b-a3b", "gb200", **{**setup, "moe_routing": "natural"})
    assert "routed load 1.2 x even" in natural.to_dict()["name"]
    with pytest.raises(bmpipe.InvalidInputError, match="no FP4 tensor cores"):
        bmpipe.Problem.from_model("nemotron-3-nano-30b-a3b", "h100-80gb", **setup)


def test_compare_and_validate_equal_the_command_line():
    pb = bmpipe.Problem.load(DEMO / "problem.yaml")
    rows = bmpipe.compare(pb, baselines=["megatron", "pipedream"], time_limit=20)
    _, out, _ = cli("compare", "--problem", DEMO / "problem.yaml", "--baselines", "megatron,pipedream",
                    "--time-limit", 20, "--json", "--progress", "none")
    assert without_seconds(rows.to_dict()) == without_seconds(json.loads(out))
    assert rows[0].name == "bmpipe" and rows.row("bmpipe").plan.iteration_time_s == rows[0].iteration_time_s
    _, out, _ = cli("validate", "--json")
    validation = bmpipe.validate()
    assert validation.to_dict() == json.loads(out)
    assert validation.held_out_time.count == json.loads(out)["held_out_time"]["count"]


def test_search_equals_the_command_line():
    found = bmpipe.search("llama3-8b", "h100-80gb", devices=16, gbs=64, seq=4096, flash_attention=True,
                          pp=[2, 4], tp=[1, 2, 4], threads=2, top=3)
    _, out, _ = cli("search", "--model", "llama3-8b", "--device", "h100-80gb", "--devices", 16, "--gbs", 64,
                    "--seq", 4096, "--flash-attn", "--pp", "2,4", "--tp", "1,2,4", "--threads", 2, "--top", 3,
                    "--json", "--progress", "none")
    cli_doc = json.loads(out)
    assert without_seconds(found.to_dict()) == without_seconds(cli_doc)
    assert found.best_plan.iteration_time_s == found.ranking[0].iteration_time_s and len(found.ranking) == 3
    assert found.best_plan.timeline() and found.best_plan.export("csv")
    with pytest.warns(DeprecationWarning):
        assert found["ranking"] == cli_doc["ranking"]  # the dict of earlier versions, deprecated
    with pytest.raises(bmpipe.InvalidInputError, match="unknown keyword 'tpp'; did you mean"):
        bmpipe.search("llama3-8b", "h100-80gb", devices=16, gbs=64, seq=4096, tpp=[2])


def test_calibrate_equals_the_command_line(tmp_path):
    runs = ROOT / "examples" / "calibrate" / "h100-runs.yaml"
    fitted = bmpipe.calibrate(runs, ["gemm"])
    _, out, _ = cli("calibrate", "--runs", runs, "--fit", "gemm", "--json", "--device-out", tmp_path / "d.yaml")
    assert fitted.to_dict() == json.loads(out)
    assert fitted.device_file == (tmp_path / "d.yaml").read_text()
    assert 0 < fitted.fitted["gemm"] < fitted.preset["gemm"]
    # The device file plans: the same model on the calibrated device is slower.
    setup = dict(tp=8, pp=2, dp=4, gbs=64, seq=4096, flash_attention=True, sequence_parallel=True)
    slow = bmpipe.plan(bmpipe.Problem.from_model("llama3-8b", str(tmp_path / "d.yaml"), **setup), time_limit=10)
    fast = bmpipe.plan(bmpipe.Problem.from_model("llama3-8b", "h100-80gb", **setup), time_limit=10)
    assert slow.iteration_time_s > fast.iteration_time_s
    with pytest.raises(bmpipe.InvalidInputError, match="did you mean 'gemm'"):
        bmpipe.calibrate(runs, ["gem"])
    # A fit that cannot end within its time limit is refused at once, with the estimate.
    with pytest.raises(bmpipe.NoPlanError, match="the fit of gemm and attention needs about"):
        bmpipe.calibrate(runs, ["gemm", "attention"], time_limit=1e-3)


@pytest.mark.parametrize("doc, kind, code", [
    ({"pipeline": {"ranks": 2}}, bmpipe.InvalidInputError, 2),
    ("missing.yaml", bmpipe.FileError, 3),
])
def test_errors_carry_the_command_lines_messages(tmp_path, doc, kind, code):
    path = tmp_path / "missing.yaml"
    if isinstance(doc, dict):
        path = tmp_path / "bad.json"
        path.write_text(json.dumps(doc))
    with pytest.raises(kind) as raised:
        bmpipe.Problem.load(path)
    rc, _, err = cli("plan", "--problem", path, check=False)
    assert rc == code
    assert err.startswith(f"bmpipe: error: {raised.value}")
    assert isinstance(raised.value, bmpipe.Error)


def test_no_fit_is_an_error_with_the_diagnosis(tmp_path):
    doc = bmpipe.Problem.load(DEMO / "problem.yaml").to_dict()
    doc["device"]["memory_bytes"] = 20_000_000_000
    path = tmp_path / "small.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(bmpipe.NoFitError) as raised:
        bmpipe.plan(bmpipe.Problem.from_dict(doc))
    rc, _, err = cli("plan", "--problem", path, "--progress", "none", check=False)
    assert rc == 4
    # The command line's diagnosis, line by line.
    assert "no plan fits in 20.00 GB per device" in str(raised.value)
    assert [f"bmpipe: {line}" for line in str(raised.value).splitlines()] == err.splitlines()


def test_bad_arguments_are_invalid_input():
    pb = bmpipe.examples.mindformers_demo()
    with pytest.raises(bmpipe.InvalidInputError, match="did you mean 'megatron'"):
        bmpipe.plan(pb, target="megatrn")
    with pytest.raises(bmpipe.InvalidInputError, match="use bnb, cbc or brute-force"):
        bmpipe.plan(pb, solver="gurobi")
    with pytest.raises(bmpipe.InvalidInputError, match="time_limit"):
        bmpipe.plan(pb, time_limit=0)
    with pytest.raises(bmpipe.InvalidInputError, match="unknown keyword 'tpp'"):
        bmpipe.Problem.from_model("llama3-8b", "h100-80gb", gbs=8, seq=4096, tpp=2)
    with pytest.raises(TypeError):
        bmpipe.plan("problem.yaml")


def test_progress_reaches_the_callback_and_its_exception_stops_the_work():
    pb = bmpipe.Problem.load(DEMO / "problem-vpp3.yaml")
    seen = []
    plan = bmpipe.plan(pb, time_limit=3, progress=seen.append)
    assert seen and all(isinstance(p, bmpipe.Progress) and p.command == "plan" for p in seen)
    assert any(p.best_s is not None and p.bound_s is not None for p in seen)
    assert min(p.best_s for p in seen if p.best_s is not None) == pytest.approx(plan.iteration_time_s, abs=1e-6)

    class Stop(Exception):
        pass

    def stop(p):
        raise Stop()

    # The exception ends the work at the first report (after a second): only a call that ignored
    # it and ran on to its 120 s limit could take a minute, not a slow machine.
    began = time.monotonic()
    with pytest.raises(Stop):
        bmpipe.plan(pb, time_limit=120, progress=stop)
    assert time.monotonic() - began < 60


def test_a_time_limit_returns_the_best_plan_with_its_gap():
    pb = bmpipe.Problem.load(DEMO / "problem-vpp3.yaml")
    # The interleaved demo is not proven within minutes: the limit stops the search, and the call
    # returns well within a minute (only an ignored limit could take that long).
    began = time.monotonic()
    plan = bmpipe.plan(pb, time_limit=2)
    assert time.monotonic() - began < 60
    assert not plan.proven_optimal and plan.gap > 0
    assert plan.bound_s < plan.iteration_time_s
    assert plan.solver["stopped_by"] == "time limit 2 s"


def test_plan_with_a_target_is_the_command_lines_when_the_limit_binds():
    # The interleaved demo is proven by neither plan within seconds: the limit binds on the target's
    # plan (three quarters of it) and on the per-layer plan it is compared with (the rest), and the
    # package runs the command line's code, so both say the same things about both plans.
    problem = DEMO / "problem-vpp3.yaml"
    plan = bmpipe.plan(bmpipe.Problem.load(problem), target="mindformers", time_limit=4)
    _, out, _ = cli("plan", "--problem", problem, "--target", "mindformers", "--time-limit", 4, "--progress", "none")

    def header(report):
        lines = report.split("\n\n")[0].splitlines()[1:]
        # Times, counts and gaps differ run to run under a binding limit; the lines' words do not.
        return [re.sub(r"[0-9][0-9.]*", "N", line) for line in lines]

    assert header(plan.report)[1:] == header(out)[1:]  # the first names the problem file
    labels = [line.split()[0] for line in header(out)]
    assert labels[:4] == ["problem", "target", "per-layer", "solver"], labels
    assert "stopped by time limit N s" in header(plan.report)[3]
    assert plan.solver["stopped_by"] == "time limit 4 s" and not plan.proven_optimal
    # The plan is one MindFormers runs as planned: its export is the plan.
    assert "NOT the plan" not in plan.export("mindformers")


def test_ctrl_c_returns_the_best_plan_with_its_gap():
    script = (
        "import bmpipe, sys\n"
        f"pb = bmpipe.Problem.load({str(DEMO / 'problem-vpp3.yaml')!r})\n"
        "print('planning', flush=True)\n"
        "plan = bmpipe.plan(pb, time_limit=60)\n"
        "print(plan.solver['stopped_by'], plan.gap > 0, plan.iteration_time_s, flush=True)\n")
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "planning\n"
    time.sleep(2)
    proc.send_signal(signal.SIGINT)
    # Ctrl-C ends the search (stopped_by says so); a run that ignored it would end only at its
    # 60 s limit, past this timeout.
    try:
        out, _ = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 0
    stopped_by, has_gap, seconds = out.split()
    assert stopped_by == "Ctrl-C" and has_gap == "True" and float(seconds) > 0


def test_the_gil_is_released_while_planning():
    pb = bmpipe.Problem.load(DEMO / "problem-vpp3.yaml")
    done = threading.Event()
    worker = threading.Thread(target=lambda: (bmpipe.plan(pb, time_limit=1.5), done.set()))
    worker.start()
    time.sleep(0.2)
    ticks = 0
    while not done.is_set() and ticks < 10**9:
        ticks += 1
    worker.join()
    # Holding the GIL, the 1.3 s of the solve would give this loop no turn at all.
    assert ticks > 100_000


def test_timeline_orders_every_op_of_the_schedule():
    pb = bmpipe.Problem.load(DEMO / "problem.yaml")
    plan = bmpipe.plan(pb)
    timeline = plan.timeline()
    assert len(timeline) == pb.ranks
    for rank, ops in enumerate(timeline):
        assert len(ops) == 2 * pb.micro_batches  # 1F1B: a forward and a backward per micro-batch
        assert all(a.end_s <= b.start_s + 1e-12 for a, b in zip(ops, ops[1:]))
        assert {op.stage for op in ops} == {rank}
    assert max(ops[-1].end_s for ops in timeline) <= plan.iteration_time_s
    assert timeline[0][0] == bmpipe.Op(stage=0, micro_batch=0, kind="F", start_s=0.0,
                                       end_s=plan.stages[0].forward_s)


def test_the_chrome_trace_equals_the_command_lines(tmp_path):
    pb = bmpipe.Problem.load(DEMO / "problem.yaml")
    plan = bmpipe.plan(pb)
    plan.save(tmp_path / "plan.json")
    cli("simulate", "--problem", DEMO / "problem.yaml", "--plan", tmp_path / "plan.json", "--trace", tmp_path / "t.json")
    text = plan.chrome_trace(title="bmpipe simulate: mindformers-demo")
    assert text == (tmp_path / "t.json").read_text()
    doc = json.loads(text)
    ops = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["cat"] in ("forward", "backward")]
    assert len(ops) == 2 * pb.ranks * pb.micro_batches
    assert max(e["ts"] + e["dur"] for e in ops) == pytest.approx(plan.iteration_time_s * 1e6)


def test_the_installed_command_is_the_same_program():
    rc, out, _ = cli("plan", "--json", "--progress", "none")
    assert rc == 0 and json.loads(out)["iteration_time_s"] == 54.81
    scripts = Path(sys.executable).parent
    r = subprocess.run([str(scripts / "bmpipe"), "--help"], capture_output=True, text=True)
    assert r.returncode == 0 and "plan" in r.stdout


def test_the_interpreter_exits_without_leaked_instances():
    # nanobind reports instances and types still alive when the module is torn down; a clean exit
    # after every kind of call (plans, typed results, errors, a raising progress callable) has none.
    script = (
        "import bmpipe\n"
        "pb = bmpipe.examples.mindformers_demo()\n"
        "plan = bmpipe.plan(pb)\n"
        "rows = bmpipe.compare(pb, baselines=['pipedream'], time_limit=5)\n"
        "found = bmpipe.search('llama3-8b', 'h100-80gb', devices=8, gbs=16, seq=4096, top=1, threads=1)\n"
        "kept = [plan, rows, found, found.best_plan, plan.timeline()]\n"
        "try:\n"
        "    bmpipe.plan(pb, target='megatrn')\n"
        "except bmpipe.InvalidInputError as e:\n"
        "    kept.append(e)\n"
        "def stop(p):\n"
        "    raise KeyboardInterrupt\n"
        "try:\n"
        "    bmpipe.plan(bmpipe.Problem.load(" + repr(str(DEMO / "problem-vpp3.yaml")) + "), progress=stop)\n"
        "except KeyboardInterrupt:\n"
        "    pass\n"
        "print('done')\n")
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout == "done\n", r.stderr
    assert "leak" not in r.stderr, r.stderr

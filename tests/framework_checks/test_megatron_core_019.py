"""megatron.args checked with megatron-core 0.19.2's own TransformerConfig validation.

megatron-core 0.17 and later need Python 3.12, so this file runs in its own environment
(scripts/pyenv-mcore019.sh: build/pyenv-mcore019, Python 3.12, torch 2.13.0 and megatron-core
0.19.2 pinned by python/constraints-mcore019.txt); scripts/framework-tests.sh runs it there. The
flags are parsed as test_megatron.py parses them (megatron-core's dataclass fields plus the few
Megatron-LM training flags), then:
  - every golden Megatron export builds a TransformerConfig that 0.19's __post_init__ accepts;
  - an export with the MoE all-to-all overlap (Megatron's combined 1F1B, --overlap-pairs) keeps
    it on, and each thing bmpipe's megatron target refuses beside it (full recomputation, `moe` in
    --recompute-modules, no interleaving with pp > 1, no expert parallelism),
    added to that export, is refused by 0.19 itself: bmpipe's rules are megatron-core's;
  - an export with fine-grained activation offloading keeps it on with its modules at 0.19's
    defaults for the per-rank amounts (fraction 1, no delta: what bmpipe's plan is), and what
    bmpipe refuses beside it (attn_proj without core_attn, the experts' modules with the MoE block
    recomputed) is refused by 0.19 too.
"""

from __future__ import annotations

import importlib

import pytest

from conftest import cases_with
import bmcase

PIN = "0.19.2"


def require_019():
    try:
        mod = importlib.import_module("megatron.core")
    except Exception as e:  # ImportError and whatever a broken install raises
        pytest.fail(f"megatron.core cannot be imported ({type(e).__name__}: {e}); run scripts/pyenv-mcore019.sh and "
                    "use build/pyenv-mcore019/bin/python", pytrace=False)
    from megatron.core import package_info
    assert package_info.__version__.split("+")[0] == PIN, f"megatron-core {package_info.__version__} is not {PIN}"
    return mod


def config_of(case, extra: list[str] | None = None, drop: tuple[str, ...] = ()):
    """TransformerConfig kwargs of the case's megatron.args, with flags added or left out."""
    import test_megatron as tm

    argv, _ = tm.bmcase.read_arg_lines(case.file("megatron.args"))
    kept, skip = [], False
    for tok in argv:
        if tok.startswith("--"):
            skip = tok in drop
        if not skip:
            kept.append(tok)
    parser, fields = tm.megatron_parser()
    ns, unknown = parser.parse_known_args(kept + (extra or []))
    assert not unknown, f"megatron.args: flags megatron-core {PIN} does not have: {unknown}"
    return tm.config_kwargs(vars(ns), fields)


@pytest.mark.parametrize("case", cases_with("megatron.args"), indirect=True)
def test_megatron_core_019_accepts_the_export(case):
    require_019()
    from megatron.core.transformer.transformer_config import TransformerConfig

    kw = config_of(case)
    cfg = TransformerConfig(**kw)
    assert (cfg.virtual_pipeline_model_parallel_size or 1) == case.V
    overlap = "--overlap-moe-expert-parallel-comm" in case.file("megatron.args").read_text()
    assert bool(cfg.overlap_moe_expert_parallel_comm) == overlap


def overlap_cases():
    folders = [p.values[0] for p in cases_with("megatron.args")]
    # Those without CUDA graphs, whose own assertions would refuse first.
    return [bmcase.load_case(f) for f in folders
            if "--overlap-moe-expert-parallel-comm" in (f / "megatron.args").read_text()
            and "--cuda-graph-impl" not in (f / "megatron.args").read_text()]


# What bmpipe's megatron target refuses beside the overlap (src/bmpipe/frameworks/megatron/settings.cc),
# as flags added to (or left out of) an export that has it, and the words of 0.19's assertion.
REFUSED = {
    "full recomputation": (["--recompute-granularity", "full", "--recompute-method", "uniform",
                            "--recompute-num-layers", "1"], (), "full recomputation"),
    "moe recompute module": (["--recompute-granularity", "selective", "--recompute-modules", "moe"], (),
                             "moe in recompute_modules"),
    "no expert parallelism": ([], ("--expert-model-parallel-size",), "expert model parallelism"),
}


@pytest.mark.parametrize("what", sorted(REFUSED))
def test_megatron_core_019_refuses_what_bmpipe_refuses_beside_the_overlap(what):
    require_019()
    from megatron.core.transformer.transformer_config import TransformerConfig

    cases = overlap_cases()
    assert cases, "no golden Megatron export with --overlap-moe-expert-parallel-comm (scripts/export-goldens.sh)"
    extra, drop, words = REFUSED[what]
    for case in cases:
        kw = config_of(case, extra, drop)
        if what == "moe recompute module":
            kw["recompute_modules"] = ["moe"]
        with pytest.raises((AssertionError, ValueError)) as e:
            TransformerConfig(**kw)
        assert words in str(e.value), f"{case.name}: {e.value}"


def test_megatron_core_019_needs_interleaving_for_the_overlap_with_pp():
    require_019()
    from megatron.core.transformer.transformer_config import TransformerConfig

    for case in overlap_cases():
        kw = config_of(case)
        if kw.get("pipeline_model_parallel_size", 1) <= 1:
            continue
        kw.pop("pipeline_model_parallel_layout", None)
        kw["virtual_pipeline_model_parallel_size"] = None
        kw["num_layers"] = case.num_decoder
        with pytest.raises(AssertionError) as e:
            TransformerConfig(**kw)
        assert "virtual_pipeline_model_parallel_size" in str(e.value)


def offload_cases():
    folders = [p.values[0] for p in cases_with("megatron.args")]
    return [bmcase.load_case(f) for f in folders
            if "--fine-grained-activation-offloading" in (f / "megatron.args").read_text()]


def test_megatron_core_019_runs_the_planned_offload():
    require_019()
    from megatron.core.transformer.transformer_config import TransformerConfig

    cases = offload_cases()
    assert cases, "no golden Megatron export with --fine-grained-activation-offloading (scripts/export-goldens.sh)"
    for case in cases:
        problem = case.problem
        cfg = TransformerConfig(**config_of(case))
        assert cfg.fine_grained_activation_offloading
        assert sorted(cfg.offload_modules) == sorted(problem["training"]["offload_modules"])
        # Every rank offloads every eligible group of every micro-batch: the plan's per-layer option.
        assert cfg.activation_offload_fraction == 1.0
        assert cfg.delta_offload_bytes_across_pp_ranks == 0
        assert cfg.min_offloaded_tensor_size == 1024 * 1024


def test_megatron_core_019_refuses_attn_proj_offload_without_core_attn():
    require_019()
    from megatron.core.transformer.transformer_config import TransformerConfig

    for case in offload_cases():
        kw = config_of(case)
        kw["offload_modules"] = ["attn_proj"]
        with pytest.raises(ValueError) as e:
            TransformerConfig(**kw)
        assert "attn_proj cannot be set to offload_modules alone without core_attn" in str(e.value)


def test_megatron_core_019_refuses_expert_offload_with_the_moe_block_recomputed():
    require_019()
    from megatron.core.transformer.transformer_config import TransformerConfig

    folders = [p.values[0] for p in cases_with("megatron.args")]
    moe = [bmcase.load_case(f) for f in folders
           if "--num-experts" in (f / "megatron.args").read_text()
           and "--overlap-moe-expert-parallel-comm" not in (f / "megatron.args").read_text()
           and "--cuda-graph-impl" not in (f / "megatron.args").read_text()]
    assert moe, "no golden Megatron export of a MoE model without the overlap"
    for case in moe:
        kw = config_of(case, ["--fine-grained-activation-offloading", "--offload-modules", "expert_fc1",
                              "--recompute-granularity", "selective"])
        kw["recompute_modules"] = ["moe"]
        with pytest.raises(AssertionError) as e:
            TransformerConfig(**kw)
        assert "while recomputing the entire MoE layer" in str(e.value), f"{case.name}: {e.value}"

"""A DeepSpeed engine read from hand-written trace records (no torch, no launch, no DeepSpeed):
the engine counts as gradient sync, ZeRO's partitioned state is never compared as replicas,
fp16 overflow skips are counted after the loss scale settles, and the engine's accumulation
window is measured against its own gradient_accumulation_steps."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ddpadvisor.evidence.trace import read_trace


@pytest.fixture(scope="module")
def kb(engine):  # type: ignore[no-untyped-def]
    return engine.kb


def _engine(stage: int, **kw: Any) -> dict[str, Any]:
    rec = {"k": "ds", "engine": 0, "step": 0, "stage": stage, "gas": 2, "micro": 4, "clip": 1.0,
           "fp16": False, "bf16": False, "dynamic": False, "min_scale": None, "scale": 1.0,
           "managed": True, "opt": "DeepSpeedZeroOptimizer", "basic": "FusedAdam",
           "n_params": 2, "dtypes": ["float32"]}  # fmt: skip
    rec.update(kw)
    return rec


def _trace(
    tmp_path: Path,
    engine: dict[str, Any] | None,
    calls: list[dict[str, Any]],
    *,
    optim: dict[int, float] | None = None,
    params: dict[int, float] | None = None,
    scales: list[float] | None = None,
    clip: float | None = None,
    clip_ctx: list[Any] | None = None,
) -> Path:
    """Two ranks, one step record per entry of ``calls`` (the step's ``ds``), a check at the
    last step with the given per-rank optimizer state and parameter sums."""
    folder = tmp_path / "trace"
    folder.mkdir()
    for rank in (0, 1):
        recs: list[dict[str, Any]] = [
            {"k": "start", "v": 3, "rank": rank, "world": 2, "backend": "gloo"}
        ]
        if engine is not None:
            recs.append(engine)
        recs.append({"k": "opt", "cls": "FusedAdam", "hp": {}, "groups": 1, "n_params": 1})
        for s, ds in enumerate(calls, start=1):
            n = ds.get("bwd", 2)
            step = {"k": "step", "s": s, "loss": [1.0] * n, "fac": [0.5] * n, "lr": [1e-3],
                    "sch": 0, "ds": ds}  # fmt: skip
            if clip is not None:  # a torch clip after the window's last backward
                step["clip"], step["cctx"] = [clip], [clip_ctx or [False, False, False]]
            if scales is not None:
                step["scale"] = scales[s - 1]
                step["finf"] = 1 if ds.get("overflow") else 0
                if ds.get("overflow"):
                    step["skip"] = True
            recs.append(step)
        chk = {"k": "chk", "s": len(calls),
               "params": [[(params or {}).get(rank, 1.0), 1.0]], "params_names": ["0.weight"],
               "grads": [], "grads_names": [],
               "optim": [[(optim or {}).get(rank, 1.0), 1.0]], "optim_names": ["group0.param0.exp_avg"]}  # fmt: skip
        if engine is not None and engine["stage"] >= 1:
            chk["optim_partitioned"] = True
        if engine is not None and engine["stage"] >= 3:
            chk["sharded"] = ["0.weight"]
        recs += [chk, {"k": "end", "why": "exit", "s": len(calls), "fwd": 0, "bwd": 0, "sched": 0,
                       "opt_steps": [len(calls)]}]  # fmt: skip
        (folder / f"rank{rank}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    return folder


def _facts(kb: Any, folder: Path) -> dict[str, Any]:
    return {o.fact: o.value for o in read_trace(kb, folder).observations}


WINDOW = {"steps": 2, "bwd": 2, "bnd": [False, True]}


def test_an_engine_syncs_and_its_partitions_are_not_replicas(tmp_path, kb):  # type: ignore[no-untyped-def]
    facts = _facts(kb, _trace(tmp_path, _engine(1), [WINDOW] * 4, optim={0: 1.0, 1: 7.0}))
    assert facts["gradient_sync_present"] is True
    assert facts["param_checksums_match"] is True
    assert "optimizer_state_match" not in facts  # each rank holds its own partition
    assert facts["uses_fsdp_or_zero"] is True
    assert facts["uses_grad_clipping"] is True
    assert facts["precision"] == "fp32"
    assert facts["ds_backwards_per_accumulation_window"] == 1.0


def test_without_an_engine_nothing_syncs(tmp_path, kb):  # type: ignore[no-untyped-def]
    """The same records without the engine: no wrap, no shard, no large collective."""
    facts = _facts(kb, _trace(tmp_path, None, [WINDOW] * 4, optim={0: 1.0, 1: 7.0}))
    assert facts["gradient_sync_present"] is False
    assert facts["optimizer_state_match"] is False


def test_stage3_compares_no_parameter(tmp_path, kb):  # type: ignore[no-untyped-def]
    facts = _facts(kb, _trace(tmp_path, _engine(3), [WINDOW] * 4, params={0: 1.0, 1: 5.0}))
    assert "param_checksums_match" not in facts
    assert "optimizer_state_match" not in facts


def test_stage1_parameters_are_replicas(tmp_path, kb):  # type: ignore[no-untyped-def]
    facts = _facts(kb, _trace(tmp_path, _engine(1), [WINDOW] * 4, params={0: 1.0, 1: 5.0}))
    assert facts["param_checksums_match"] is False


@pytest.mark.parametrize(
    ("calls", "ratio"),
    [
        ({"steps": 2, "bwd": 2, "bnd": [False, True]}, 1.0),  # engine.step every micro-batch
        ({"steps": 1, "bwd": 2, "bnd": [False, True]}, 1.0),  # accelerate owns the boundary
        ({"steps": 2, "bwd": 4, "bnd": [False, False, True, True]}, 2.0),  # the loop's window
    ],
)
def test_backward_calls_per_engine_window(tmp_path, kb, calls, ratio):  # type: ignore[no-untyped-def]
    facts = _facts(kb, _trace(tmp_path, _engine(2), [calls] * 6))
    assert facts["ds_backwards_per_accumulation_window"] == ratio


@pytest.mark.parametrize(
    ("stage", "says"),
    [(0, "all summed"), (1, "only the last"), (2, "only the last"), (3, "all summed")],
)
def test_a_stretched_window_says_what_the_stage_keeps(tmp_path, kb, stage, says):  # type: ignore[no-untyped-def]
    """bench/deepspeed_step_window.py (DeepSpeed 0.19.8): a step over a stretched window sums
    every micro-batch on stages 0 and 3 and keeps only the last one on ZeRO-1/2."""
    window = {"steps": 2, "bwd": 4, "bnd": [False, False, True, True]}
    obs = read_trace(kb, _trace(tmp_path, _engine(stage), [window] * 6)).observations
    (found,) = [o for o in obs if o.fact == "ds_backwards_per_accumulation_window"]
    assert found.value == 2.0
    assert says in found.detail


def test_fp16_overflows_after_the_scale_settled_are_counted(tmp_path, kb):  # type: ignore[no-untyped-def]
    """DeepSpeed's dynamic scaler starts high and halves on each overflow: the leading skips
    are calibration; overflows after a clean step are not."""
    over = dict(WINDOW, overflow=True)
    calls = [over, over, WINDOW, WINDOW, over, WINDOW, over, WINDOW]
    scales = [65536.0, 32768.0, 16384.0, 16384.0, 16384.0, 8192.0, 8192.0, 4096.0]
    engine = _engine(2, fp16=True, dynamic=True, min_scale=1.0, scale=65536.0)
    facts = _facts(kb, _trace(tmp_path, engine, calls, scales=scales))
    assert facts["precision"] == "fp16_amp"
    assert facts["uses_grad_scaler"] is True
    assert facts["nonfinite_grad_steps"] == 2
    assert facts["ds_backwards_per_accumulation_window"] == 1.0  # skipped steps left out


@pytest.mark.parametrize(
    ("config_clip", "norm", "void", "clipping"),
    [
        (0.0, 0.0, True, False),  # the loop's clip found nothing, the config clips nothing
        (1.0, 0.0, True, True),  # the engine clips by its config: the loop's call is void
        (0.0, 3.5, False, True),  # the torch clip saw gradients (stage 1 before the boundary)
    ],
)
def test_a_torch_clip_under_zero(tmp_path, kb, config_clip, norm, void, clipping):  # type: ignore[no-untyped-def]
    facts = _facts(kb, _trace(tmp_path, _engine(2, clip=config_clip), [WINDOW] * 4, clip=norm))
    assert facts["ds_clip_found_no_grads"] is void
    assert facts["uses_grad_clipping"] is clipping


@pytest.mark.parametrize(
    ("ctx", "void"),
    [
        # accelerate: backward() steps the engine, so the loop's clip comes before the next
        # window's first backward (a backward follows it in its window)
        ([False, False, True, 0], True),
        # a clip between two backwards of one window measured nothing final: not this fact
        ([False, False, True, 1], None),
    ],
)
def test_a_torch_clip_after_the_engine_step(tmp_path, kb, ctx, void):  # type: ignore[no-untyped-def]
    folder = _trace(tmp_path, _engine(2, clip=0.0), [WINDOW] * 4, clip=0.0, clip_ctx=ctx)
    facts = _facts(kb, folder)
    assert facts.get("ds_clip_found_no_grads") is void
    assert facts.get("clip_inside_no_sync") is (None if void else True)

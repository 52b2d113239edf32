"""What frameworks do by design, read from hand-written trace records (no torch, no launch):
accelerate's BatchSamplerShard and AcceleratedScheduler, and a loss scaled by the world size
under a framework that divides by the accumulation steps (Lightning)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ddpadvisor.evidence.trace import read_trace


@pytest.fixture(scope="module")
def kb(engine):  # type: ignore[no-untyped-def]
    return engine.kb


def _write(folder: Path, per_rank: dict[int, list[dict[str, Any]]]) -> Path:
    folder.mkdir(parents=True)
    for rank, recs in per_rank.items():
        (folder / f"rank{rank}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    return folder


def _head(rank: int) -> list[dict[str, Any]]:
    return [
        {"k": "start", "v": 2, "rank": rank, "world": 2, "backend": "gloo"},
        {"k": "wrap", "ddp": 0, "n_buffers": 0, "batchnorm": [], "dtypes": ["float32"]},
    ]


def _sharded_epoch(rank: int, shard: bool) -> list[dict[str, Any]]:
    """One epoch over 16 samples in batches of 2: the inner RandomSampler's order is the same
    on both ranks; BatchSamplerShard hands batch i to rank i % 2."""
    order = [5, 3, 9, 0, 12, 7, 1, 14, 2, 11, 6, 15, 4, 8, 13, 10]
    batches = [order[i : i + 2] for i in range(0, 16, 2)]
    mine = [b for i, b in enumerate(batches) if i % 2 == rank] if shard else batches
    epoch: dict[str, Any] = {
        "k": "epoch",
        "it": 1,
        "sampler": 0,
        "cls": "RandomSampler",
        "dataset_len": 16,
        "bs": 2,
        "shuffle": True,
        "set_epoch_calls": [],
        "s": 0,
    }
    if shard:
        epoch.update(shard="BatchSamplerShard", shards=2, process_index=rank, split_batches=False)
    idx = {"k": "idx", "it": 1, "part": 0, "idx": [i for b in mine for i in b], "end": True}
    return [epoch, idx]


def _steps(n: int, sch: int) -> list[dict[str, Any]]:
    return [
        {"k": "step", "s": s, "loss": [1.0], "syn": [True], "lr": [0.1], "sch": sch}
        for s in range(1, n + 1)
    ]


@pytest.mark.parametrize("shard", [True, False])
def test_a_sharding_batch_sampler_splits_the_data(tmp_path, kb, shard):  # type: ignore[no-untyped-def]
    folder = _write(
        tmp_path / "t",
        {r: [*_head(r), *_sharded_epoch(r, shard), *_steps(4, 1)] for r in (0, 1)},
    )
    facts = {o.fact: o.value for o in read_trace(kb, folder).observations}
    assert facts["uses_distributed_sampler"] is shard
    assert facts["sampler_shards_overlap"] is (not shard)


@pytest.mark.parametrize(
    ("by", "expected"),
    [("accelerate.scheduler.AcceleratedScheduler.step", 1.0), ("__main__.main", 2.0)],
)
def test_a_scheduler_driver_that_steps_per_process(tmp_path, kb, by, expected):  # type: ignore[no-untyped-def]
    sched = {"k": "sched", "cls": "LambdaLR", "primary": True, "by": by}
    folder = _write(tmp_path / "t", {r: [*_head(r), sched, *_steps(6, 2)] for r in (0, 1)})
    facts = {o.fact: o.value for o in read_trace(kb, folder).observations}
    assert facts["scheduler_steps_per_optimizer_step"] == expected


@pytest.mark.parametrize(("factor", "scaled"), [(0.5, True), (0.25, False)])
def test_world_size_scaling_under_a_dividing_framework(tmp_path, kb, factor, scaled):  # type: ignore[no-untyped-def]
    """Four micro-batches per step: factor 0.5 = world 2 / 4 (scaled, then divided)."""
    steps = [
        {"k": "step", "s": s, "loss": [1.0] * 4, "fac": [factor] * 4, "syn": [False] * 3 + [True]}
        for s in range(1, 7)
    ]
    folder = _write(tmp_path / "t", {r: [*_head(r), *steps] for r in (0, 1)})
    facts = {o.fact: o.value for o in read_trace(kb, folder).observations}
    assert facts["grad_accum_steps"] == 4
    assert facts["loss_divided_by_accum"] is True
    assert facts["loss_multiplied_by_world_size"] is scaled


@pytest.mark.parametrize(
    ("accum", "factor", "divided"),
    [(1, 0.5, True), (1, 1.0, False), (4, 0.125, True), (4, 0.25, False)],
)
def test_world_size_division_on_top_of_ddp(tmp_path, kb, accum, factor, divided):  # type: ignore[no-untyped-def]
    """Two ranks: a loss that reaches backward with 1 / (world x accumulation) is divided by
    the world size as well as by the accumulation count; 1 / accumulation alone is not."""
    steps = [
        {
            "k": "step",
            "s": s,
            "loss": [1.0] * accum,
            "fac": [factor] * accum,
            "syn": [False] * (accum - 1) + [True],
        }
        for s in range(1, 7)
    ]
    folder = _write(tmp_path / "t", {r: [*_head(r), *steps] for r in (0, 1)})
    facts = {o.fact: o.value for o in read_trace(kb, folder).observations}
    assert facts["loss_divided_by_world_size"] is divided

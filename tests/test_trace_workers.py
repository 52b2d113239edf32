"""DataLoader workers' random streams: the probe the agent puts around a job's
worker_init_fn (hooks/workers.py), run in real worker processes, and the reader's verdict on
hand-written ``rank<R>.workers.jsonl`` files (evidence/trace/rng.py, load.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.utils.data import DataLoader, Dataset

from ddpadvisor.evidence.trace import read_trace
from ddpadvisor.tracing.agent.ddpadvisor_trace_agent.hooks.workers import WorkerProbe


class Noisy(Dataset):  # type: ignore[type-arg]
    """Each item draws from torch's generator, as a random crop would."""

    def __len__(self) -> int:
        return 8

    def __getitem__(self, i: int) -> torch.Tensor:
        return torch.rand(2) + i


class SeedFrom:
    """A worker_init_fn seeding torch with ``base + worker_id`` (picklable)."""

    def __init__(self, base: int) -> None:
        self.base = base

    def __call__(self, worker_id: int) -> None:
        torch.manual_seed(self.base + worker_id)


def _probe(tmp_path: Path, name: str, base: int) -> list[dict[str, Any]]:
    path = tmp_path / f"{name}.workers.jsonl"
    probe = WorkerProbe(SeedFrom(base), str(path), 1)
    for _ in DataLoader(Noisy(), batch_size=2, num_workers=2, worker_init_fn=probe):
        pass
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_the_probe_records_each_workers_draws_after_the_jobs_seeding(tmp_path: Path) -> None:
    a, b, c = _probe(tmp_path, "a", 7), _probe(tmp_path, "b", 7), _probe(tmp_path, "c", 99)
    assert {(r["w"], r["n"]) for r in a} == {(0, 0), (0, 1), (1, 0), (1, 1)}
    first = {r["w"]: r for r in a if r["n"] == 0}
    assert all(r["b"][0] != r["a"][0] for r in a)  # torch's generator drew in every fetch
    assert first[0]["b"][0] != first[1]["b"][0]  # the job seeded its workers apart
    same = {r["w"]: r["b"][0] for r in b if r["n"] == 0}
    other = {r["w"]: r["b"][0] for r in c if r["n"] == 0}
    assert same == {w: r["b"][0] for w, r in first.items()}  # the job's seed decides
    assert other[0] != first[0]["b"][0]


def _rank_files(tmp_path: Path, streams: dict[int, list[str]], main: bool | None) -> Path:
    """Two ranks, six steps; rank r's worker w starts its first fetch in state
    ``streams[r][w]``. ``main``: the main process also drew per fetch, alike on both ranks
    (True), apart (False), or not at all (None)."""
    folder = tmp_path / "t"
    folder.mkdir()
    for rank, states in streams.items():
        recs: list[dict[str, Any]] = [
            {"k": "start", "v": 3, "rank": rank, "world": 2, "backend": "gloo"},
            {"k": "wrap", "ddp": 0, "n_buffers": 0, "batchnorm": [], "dtypes": ["float32"]},
        ]
        for s in range(1, 7):
            step: dict[str, Any] = {"k": "step", "s": s, "loss": [1.0], "syn": [True],
                                    "lr": [0.1], "sch": 0}  # fmt: skip
            if main is not None:
                tag = "x" if main else f"r{rank}"
                step["rng"] = [[s - 1, [f"{tag}{s}", "p", "n"], [f"{tag}{s}+", "p", "n"]]]
            recs.append(step)
        (folder / f"rank{rank}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
        lines = [
            {"k": "wfetch", "it": 1, "w": w, "n": 0, "b": [st, "p", "n"], "a": [st + "+", "p", "n"]}
            for w, st in enumerate(states)
        ]
        (folder / f"rank{rank}.workers.jsonl").write_text(
            "".join(json.dumps(r) + "\n" for r in lines) + "not json\n"
        )
    return folder


@pytest.mark.parametrize(
    ("streams", "main", "identical"),
    [
        ({0: ["s0", "s1"], 1: ["s0", "s1"]}, None, True),  # worker k replays one stream
        ({0: ["s0", "s1"], 1: ["t0", "t1"]}, None, False),  # the rank mixed into the seeds
        ({0: ["s0", "s1"], 1: ["s0", "s1"]}, False, True),  # the workers' draws decide
        ({0: ["s0", "s1"], 1: ["t0", "t1"]}, True, True),  # the main process's alike draws stand
    ],
)
def test_the_workers_streams_across_ranks(tmp_path, engine, streams, main, identical):  # type: ignore[no-untyped-def]
    got = read_trace(engine.kb, _rank_files(tmp_path, streams, main))
    facts = {o.fact: o.value for o in got.observations}
    assert facts.get("augmentation_rng_identical_across_ranks") is identical
    assert facts.get("uses_random_augmentation") is True  # the workers drew while fetching
    # the bad line is named, nothing else is lost
    assert any("unreadable worker record" in w for w in got.warnings)


def test_a_workers_file_that_is_no_regular_file_is_named(tmp_path: Path, engine: Any) -> None:
    folder = _rank_files(tmp_path, {0: ["s0", "s1"], 1: ["s0", "s1"]}, None)
    (folder / "rank1.workers.jsonl").unlink()
    os.mkfifo(folder / "rank1.workers.jsonl")
    got = read_trace(engine.kb, folder)  # must not block on the FIFO
    assert any("rank1.workers.jsonl" in w and "not a regular file" in w for w in got.warnings)
    assert "augmentation_rng_identical_across_ranks" not in {o.fact for o in got.observations}

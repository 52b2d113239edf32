"""Augmentation draws per rank, read from hand-written ``rng`` entries (no torch, no launch):
each entry is ``[fetch number, states before, states after]``, the states being digests of the
torch, python and numpy generators, then of the job's own generators (hooks/data.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ddpadvisor.evidence.trace import read_trace

FETCHES = 8


def _trace(tmp_path: Path, own: str, global_in_loop: bool = False) -> Path:
    """One fetch per step. ``own``: how the job's own generator moves, "loop-alike" (drawn by
    the loop between fetches, the same states on every rank), "loop-per-rank" (the same, a
    different stream per rank) or "still" (never drawn). ``global_in_loop``: the torch global
    generator advances between fetches (dropout in the forward), never inside one."""
    folder = tmp_path / "trace"
    folder.mkdir()
    for rank in (0, 1):
        recs: list[dict[str, Any]] = [
            {"k": "start", "v": 3, "rank": rank, "world": 2, "backend": "gloo"}
        ]
        for s in range(1, FETCHES + 1):
            n = s - 1
            g_torch = f"t{n}" if global_in_loop else "t"
            if own == "loop-alike":
                g_own = f"o{n}"
            elif own == "loop-per-rank":
                g_own = f"o{n}r{rank}"
            else:
                g_own = "o"
            state = [g_torch, "p", "n", g_own]
            recs.append({"k": "step", "s": s, "loss": [1.0], "lr": [0.1], "sch": 0,
                         "rng": [[n, state, list(state)]]})  # fmt: skip
        (folder / f"rank{rank}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    return folder


@pytest.fixture(scope="module")
def kb(engine):  # type: ignore[no-untyped-def]
    return engine.kb


def _facts(kb: Any, folder: Path) -> dict[str, Any]:
    return {o.fact: o.value for o in read_trace(kb, folder).observations}


@pytest.mark.parametrize(
    ("own", "global_in_loop", "identical"),
    [
        ("loop-alike", False, True),
        ("loop-per-rank", False, False),
        # the global generator moving in the loop is dropout, not augmentation: no reading
        ("still", True, None),
    ],
)
def test_the_jobs_own_generator_drawn_by_the_loop(tmp_path, kb, own, global_in_loop, identical):  # type: ignore[no-untyped-def]
    facts = _facts(kb, _trace(tmp_path, own, global_in_loop))
    assert facts.get("augmentation_rng_identical_across_ranks") is identical
    # draws measured around the fetches are random augmentation (or noise) in use; no draw
    # read says nothing of it (the trace never states false: it may have missed the draws)
    assert facts.get("uses_random_augmentation") is (True if identical is not None else None)

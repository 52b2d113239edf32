"""Models the training step runs beside the wrapped one (``aux`` fingerprints in check records),
compared across ranks by the reader: only where every rank ran them (hand-written records; no
torch, no launch)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ddpadvisor.evidence.trace import read_trace


def _trace(tmp_path: Path, aux: dict[int, dict[str, list[float]]]) -> Path:
    folder = tmp_path / "trace"
    folder.mkdir()
    for rank in (0, 1):
        recs: list[dict[str, Any]] = [
            {"k": "start", "v": 3, "rank": rank, "world": 2, "backend": "gloo"},
            {"k": "wrap", "ddp": 0, "n_buffers": 0, "batchnorm": [], "dtypes": ["float32"]},
        ]
        for s in (1, 2):
            recs.append({"k": "step", "s": s, "loss": [1.0], "syn": [True], "lr": [0.1], "sch": 0})
            chk = {"k": "chk", "s": s, "params": [[1.0, 1.0]], "params_names": ["0.weight"]}
            names = list(aux[rank])
            if names:
                chk["aux_names"] = names
                chk["aux"] = [aux[rank][n] for n in names]
            recs.append(chk)
        (folder / f"rank{rank}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    return folder


@pytest.fixture(scope="module")
def kb(engine):  # type: ignore[no-untyped-def]
    return engine.kb


@pytest.mark.parametrize(
    ("aux", "match"),
    [
        # a teacher loaded on rank 0 only
        ({0: {"aux0.MLP.0.weight": [3.0, 1.0]}, 1: {"aux0.MLP.0.weight": [5.0, 1.0]}}, False),
        ({0: {"aux0.MLP.0.weight": [3.0, 1.0]}, 1: {"aux0.MLP.0.weight": [3.0, 1.0]}}, True),
        # run on rank 0 alone (its evaluation, say): nothing to compare
        ({0: {"aux0.MLP.0.weight": [3.0, 1.0]}, 1: {}}, None),
    ],
)
def test_models_beside_the_wrapped_one(tmp_path, kb, aux, match):  # type: ignore[no-untyped-def]
    facts = {o.fact: o.value for o in read_trace(kb, _trace(tmp_path, aux)).observations}
    assert facts.get("frozen_models_match") is match
    assert facts["param_checksums_match"] is True

"""Sharded training in the trace: FSDP shards and partitioned optimizer state (ZeRO-1) hold
different values on every rank by design; they must never read as diverged replicas."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from ddpadvisor.evidence.trace import read_trace
from ddpadvisor.tracing.agent.ddpadvisor_trace_agent.core import _sharded


def _chk(rank: int, s: int, **extra: Any) -> dict[str, Any]:
    rec = {
        "k": "chk",
        "s": s,
        "params": [[1.0 + rank, 2.0], [0.5, 0.25]],
        "params_names": ["flat_param_0", "head.weight"],
        "grads": [],
        "grads_names": [],
        "optim": [[0.1 * (rank + 1), 0.01]],
        "optim_names": [f"layer{rank}.exp_avg"],
    }
    rec.update(extra)
    return rec


def _trace(folder: Path, checks: dict[int, list[dict[str, Any]]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for rank, chks in checks.items():
        recs: list[dict[str, Any]] = [
            {"k": "start", "v": 2, "rank": rank, "world": 2, "backend": "gloo", "torch": "2.13"}
        ]
        for s in (1, 2, 3, 4):
            recs.append({"k": "step", "s": s, "loss": [1.0 / s], "lr": [1e-3], "sch": 0})
            recs += [c for c in chks if c["s"] == s]
        recs.append({"k": "end", "s": 4, "sched": 0})
        (folder / f"rank{rank}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    return folder


def _facts(kb: Any, folder: Path) -> dict[str, Any]:
    return {o.fact: o.value for o in read_trace(kb, folder).observations}


@pytest.fixture(scope="module")
def kb(engine):  # type: ignore[no-untyped-def]
    return engine.kb


def test_sharded_tensors_are_left_out_and_replicated_ones_compared(tmp_path, kb):  # type: ignore[no-untyped-def]
    checks = {r: [_chk(r, s, sharded=["flat_param_0"]) for s in (1, 2, 4)] for r in (0, 1)}
    facts = _facts(kb, _trace(tmp_path / "same", checks))
    assert facts["param_checksums_match"] is True  # head.weight, the replicated tensor, agrees
    for rec in checks[1]:
        rec["params"][1] = [0.5, 0.26]
    facts = _facts(kb, _trace(tmp_path / "diverged", checks))
    assert facts["param_checksums_match"] is False


def test_nothing_but_shards_leaves_replicas_unmeasured(tmp_path, kb):  # type: ignore[no-untyped-def]
    sharded = ["flat_param_0", "head.weight", "layer0.exp_avg", "layer1.exp_avg"]
    checks = {r: [_chk(r, s, sharded=sharded) for s in (1, 2)] for r in (0, 1)}
    facts = _facts(kb, _trace(tmp_path / "t", checks))
    assert "param_checksums_match" not in facts
    assert "optimizer_state_match" not in facts


def test_partitioned_optimizer_state_is_not_compared(tmp_path, kb):  # type: ignore[no-untyped-def]
    checks = {r: [_chk(r, s, sharded=["flat_param_0"]) for s in (1, 2)] for r in (0, 1)}
    assert _facts(kb, _trace(tmp_path / "plain", checks))["optimizer_state_match"] is False
    for chks in checks.values():
        for rec in chks:
            rec["optim_partitioned"] = True
    assert "optimizer_state_match" not in _facts(kb, _trace(tmp_path / "zero", checks))


def test_the_agent_tells_fsdp_shards_from_replicas() -> None:
    plain = torch.nn.Parameter(torch.zeros(4))
    assert not _sharded(plain)
    flat = torch.nn.Parameter(torch.zeros(2))
    flat._is_flat_param = True  # type: ignore[attr-defined]
    flat._unpadded_unsharded_size = torch.Size([4])  # type: ignore[attr-defined]
    flat._sharded_size = torch.Size([2])  # type: ignore[attr-defined]
    assert _sharded(flat)
    flat._sharded_size = torch.Size([4])  # type: ignore[attr-defined]  # NO_SHARD: a full copy
    assert not _sharded(flat)
    view = torch.zeros(3)
    view._fsdp_flattened = True  # type: ignore[attr-defined]  # use_orig_params=True
    assert _sharded(view)

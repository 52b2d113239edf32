"""Ranks that do not step in lockstep are traced without deadlock, and the job is unchanged.

tests/zoo/uneven/uneven_ranks.py runs a rank-0-only pre-training before DDP, uneven inputs
under ``model.join()`` (uneven last batches included), an evaluation on rank 0 only and an
extra optimizer on rank 1. It is run once plain (torchrun) and once under ``ddpadvisor trace``:
same exit status, same final loss and parameter checksum on every rank, and the traced run
within twice the plain run's wall time (a deadlock would hit the stall limit instead).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ddpadvisor.evidence.trace import load_trace

SCRIPT = Path(__file__).resolve().parent / "zoo" / "uneven" / "uneven_ranks.py"

pytestmark = pytest.mark.slow


def _env(out: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DDPADVISOR_TRACE")}
    env["UNEVEN_OUT"] = str(out)
    return env


def _run(cmd: list[str], out: Path) -> tuple[int, float, dict[int, dict[str, float]]]:
    out.mkdir()
    began = time.monotonic()
    proc = subprocess.run(
        cmd, env=_env(out), capture_output=True, text=True, timeout=240, check=False
    )
    seconds = time.monotonic() - began
    finals = {}
    for path in out.glob("rank*.json"):
        rec = json.loads(path.read_text())
        finals[int(rec["rank"])] = {"loss": rec["loss"], "checksum": rec["checksum"]}
    return proc.returncode, seconds, finals


@pytest.fixture(scope="module")
def runs(tmp_path_factory):  # type: ignore[no-untyped-def]
    root = tmp_path_factory.mktemp("uneven")
    plain = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    plain += ["--nproc_per_node", "2", str(SCRIPT)]
    traced = [sys.executable, "-m", "ddpadvisor", "trace", "--nproc", "2", "--quiet"]
    traced += ["--every", "1", "--stall", "60", "--out", str(root / "trace"), "--", str(SCRIPT)]
    return {
        "plain": _run(plain, root / "plain"),
        "traced": _run(traced, root / "traced"),
        "trace": root / "trace",
    }


def test_uneven_ranks_same_exit_and_numbers_plain_and_traced(runs):  # type: ignore[no-untyped-def]
    plain_code, plain_s, plain_finals = runs["plain"]
    traced_code, traced_s, traced_finals = runs["traced"]
    assert plain_code == 0
    assert traced_code == plain_code
    assert sorted(plain_finals) == [0, 1]
    assert traced_finals == plain_finals  # bit for bit: the agent changed nothing
    assert traced_s <= 2 * plain_s, (plain_s, traced_s)


def test_uneven_ranks_trace_counts_the_ddp_phase_per_rank(runs):  # type: ignore[no-untyped-def]
    ranks, _meta, _warnings = load_trace(runs["trace"])
    steps = {t.rank: sorted(t.steps) for t in ranks}
    # rank 0: 6 pre-training steps (dropped: another phase), then 7 DDP steps; rank 1: 5.
    assert steps == {0: list(range(1, 8)), 1: list(range(1, 6))}
    assert any(r.get("k") == "restart" for r in ranks[0].records)
    assert not any(r.get("k") == "restart" for r in ranks[1].records)


def test_uneven_ranks_replicas_compared_at_aligned_steps(runs, engine):  # type: ignore[no-untyped-def]
    from ddpadvisor.evidence.trace import read_trace

    facts = {o.fact: o.value for o in read_trace(engine.kb, runs["trace"]).observations}
    # Counting rank 0's pre-training steps would misalign the ranks and report a divergence.
    assert facts.get("param_checksums_match") is True
    assert facts.get("grads_match_after_sync") is True

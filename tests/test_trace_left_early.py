"""A rank whose script ends early (``sys.exit(0)`` on rank 1) is named, not the peer that then
lost its connection to it (issue 30)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ddpadvisor.tracing.launch import classify

LOG = """Root Cause (first observed failure):
[0]:
  time      : 2026-12-07_05:03:36
  host      : localhost
  rank      : 0 (local_rank: 0)
  exitcode  : 1 (pid: 5380)
"""


def _write(out: Path, rank: int, records: list[dict[str, object]]) -> None:
    start = {"k": "start", "rank": rank, "world": 2, "t": 0.0}
    lines = [json.dumps(r) for r in [start, *records]]
    (out / f"rank{rank}.jsonl").write_text("\n".join(lines) + "\n")


def test_a_rank_that_ended_while_its_peer_trained_is_named_first(tmp_path: Path) -> None:
    (tmp_path / "torchrun.log").write_text(LOG)
    _write(tmp_path, 1, [{"k": "end", "why": "exit", "s": 2, "fwd": 2, "t": 4.3}])
    _write(
        tmp_path,
        0,
        [
            {"k": "exception", "type": "RuntimeError", "msg": "Connection closed by peer"}
            | {"where": "train.py:9", "s": 2, "t": 6.2},
            {"k": "end", "why": "exit", "s": 2, "fwd": 3, "t": 6.2},
        ],
    )
    result = classify(tmp_path, 1, 7.0, 2, [], False, False, 300.0)
    assert result.failure is not None
    assert result.failure.ranks[0] == 1
    assert result.failure.message.startswith("rank 1 left the run early")
    assert "rank 0 raised RuntimeError" in result.failure.message


def test_a_rank_that_finished_all_its_steps_is_not_blamed(tmp_path: Path) -> None:
    """Rank 0 saving a checkpoint after the loop and failing there: rank 1 did nothing wrong."""
    (tmp_path / "torchrun.log").write_text(LOG)
    _write(tmp_path, 1, [{"k": "end", "why": "exit", "s": 5, "fwd": 5, "t": 4.0}])
    _write(
        tmp_path,
        0,
        [
            {"k": "exception", "type": "OSError", "msg": "disk full", "where": "train.py:30"}
            | {"s": 5, "t": 6.0},
            {"k": "end", "why": "exit", "s": 5, "fwd": 5, "t": 6.0},
        ],
    )
    result = classify(tmp_path, 1, 7.0, 2, [], False, False, 300.0)
    assert result.failure is not None and result.failure.ranks == [0]
    assert result.failure.message.startswith("rank 0 raised OSError")


@pytest.mark.slow
def test_sys_exit_on_rank_1_is_reported_as_rank_1_leaving(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    script = tmp_path / "train.py"
    script.write_text(
        textwrap.dedent(
            """
            import sys, torch, torch.distributed as dist
            dist.init_process_group("gloo")
            model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 1))
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            for step in range(5):
                if dist.get_rank() == 1 and step == 2:
                    sys.exit(0)
                loss = model(torch.randn(8, 4)).pow(2).mean()
                opt.zero_grad(); loss.backward(); opt.step()
            dist.destroy_process_group()
            """
        )
    )
    out = tmp_path / "trace"
    options = ["--quiet", "--nproc", "2", "--timeout", "120", "--out", str(out)]
    proc = subprocess.run(
        [sys.executable, "-m", "ddpadvisor", "trace", *options, "--", str(script)],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 3, proc.stderr
    assert "rank 1 left the run early" in proc.stderr, proc.stderr

"""One torchrun launch (2 gloo ranks) shared by every multi-rank experiment test.

Under xdist each worker has its own session, so the launch is shared through the run's common
temporary folder: the first worker to need it launches under a file lock, the others read its
results.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

WORKER = Path(__file__).with_name("ddp_experiments.py")
WORLD = 2
LAUNCH_TIMEOUT_S = 240


class Results:
    """Per-rank results of the worker, looked up by experiment name."""

    def __init__(self, ranks: list[dict[str, Any]]) -> None:
        self.ranks = ranks

    def __call__(self, name: str) -> list[dict[str, Any]]:
        for rank, payload in enumerate(self.ranks):
            if name in payload["errors"]:
                pytest.fail(
                    f"experiment {name!r} failed on rank {rank}:\n{payload['errors'][name]}"
                )
        return [payload["results"][name] for payload in self.ranks]


def _read_complete(out: Path) -> list[dict[str, Any]] | None:
    ranks = []
    for rank in range(WORLD):
        path = out / f"rank{rank}.json"
        if not path.is_file():
            return None
        payload = json.loads(path.read_text())
        if payload.get("done") is not True:
            return None
        ranks.append(payload)
    return ranks


@pytest.fixture(scope="session")
def ddp_results(tmp_path_factory: pytest.TempPathFactory) -> Results:
    pytest.importorskip("torch", reason="the experiments need torch")
    base = tmp_path_factory.getbasetemp()
    # popen-gwN's parent is this run's own folder, shared by its workers (without xdist the
    # parent holds earlier runs too, so the launch stays in this run's folder).
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    out = shared / "ddp_experiments"
    with open(shared / "ddp_experiments.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        ranks = _read_complete(out) if out.is_dir() else None
        if ranks is None:
            out.mkdir(exist_ok=True)
            ranks = _launch(out)
    return Results(ranks)


def _launch(out: Path) -> list[dict[str, Any]]:
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",  # a free rendezvous port, so parallel test runs do not collide
        f"--nproc_per_node={WORLD}",
        str(WORKER),
        str(out),
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    # A new session lets a timeout kill torchrun and both ranks together.
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        start_new_session=True,
    )
    try:
        log, _ = proc.communicate(timeout=LAUNCH_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        log, _ = proc.communicate()
        pytest.fail(f"the experiment launch timed out after {LAUNCH_TIMEOUT_S} s:\n{log[-4000:]}")
    ranks = _read_complete(out)
    if ranks is None:
        pytest.fail(
            f"the experiment launch exited {proc.returncode} without results:\n{log[-4000:]}"
        )
    # A nonzero exit after both ranks wrote complete results is the known gloo teardown
    # crash (torch 2.13), not a failed experiment.
    return ranks

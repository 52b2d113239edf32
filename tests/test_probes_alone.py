"""A probe copied to a node with its folder runs alone under plain torchrun, where neither
ddpadvisor nor numpy needs to be importable (the folder is all it takes)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.slow
pytest.importorskip("torch")

BLOCK = "raise ModuleNotFoundError('{name} must not be needed by the probes', name='{name}')\n"


def test_one_probe_runs_alone_from_a_copied_folder(tmp_path: Path) -> None:
    shutil.copytree(REPO / "probes", tmp_path / "node" / "probes")
    blocker = tmp_path / "blocker"
    for name in ("ddpadvisor", "numpy"):
        (blocker / name).mkdir(parents=True)
        (blocker / name / "__init__.py").write_text(BLOCK.format(name=name))
    (tmp_path / "node" / "env.py").write_text("raise ImportError('the user module env')\n")
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node"]
    cmd += ["2", "probes/seeds.py", "--out", str(out), "--timeout", "60", "--backend", "gloo"]
    env = {**os.environ, "PYTHONPATH": str(blocker), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        cmd, cwd=tmp_path / "node", env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    for rank in (0, 1):
        record = json.loads((out / "seeds" / f"rank{rank}.json").read_text())
        assert record["status"] == "ok" and record["rank"] == rank and record["format"] == 2
        # numpy is blocked here: its RNG is not reported, the others are.
        assert set(record["result"]["fingerprints"]) == {"python", "torch"}

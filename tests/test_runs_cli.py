"""The run options of ``ddpadvisor trace`` and ``probe``: defaults stated, bad values exit 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ddpadvisor", *args], capture_output=True, text=True, check=False
    )


def test_help_states_the_default_deadline_and_stall() -> None:
    text = " ".join(_run("trace", "--help").stdout.split())
    assert "(default 3600; 0: no limit)" in text and "(default 300; 0: never)" in text
    assert "128+N the run was interrupted by signal N" in text
    assert "(default 300)" in " ".join(_run("probe", "--help").stdout.split())


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--timeout", "-1"], "--timeout: must be 0 or more"),
        (["--stall", "nan"], "--stall: must be 0 or more"),
        (["--timeout", "inf"], "--timeout: must be 0 or more"),
        (["--nproc", "0"], "--nproc: must be at least 1"),
        (["--every", "-3"], "--every: must be at least 1"),
        (["--max-steps", "0"], "--max-steps: must be at least 1"),
        (["--verify", ""], "--verify: needs a cause id"),
        (["--verify", "  "], "--verify: needs a cause id"),
        (["--out", "FILE"], "--out exists and is not a folder"),
    ],
)
def test_bad_run_options_are_one_line_exit_2(tmp_path: Path, args: list[str], needle: str) -> None:
    (tmp_path / "FILE").write_text("")
    script = tmp_path / "train.py"
    script.write_text("")
    args = [str(tmp_path / "FILE") if a == "FILE" else a for a in args]
    proc = _run("trace", *args, "--", str(script))
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["env", "--nproc", "0"], "--nproc: must be at least 1"),
        (["--nproc", "-2"], "--nproc: must be at least 1"),
        (["--timeout", "nan"], "--timeout: must be a number above 0"),
        (["--timeout", "0"], "--timeout: must be a number above 0"),
        (["--collective-timeout", "-1"], "--collective-timeout: must be a number above 0"),
        (["--collective-timeout", "inf"], "--collective-timeout: must be a number above 0"),
        (["--nnodes", "0"], "--nnodes: must be at least 1"),
        (["--node-rank", "-1"], "--node-rank: must be at least 0"),
        (["--steps", "0"], "--steps: must be at least 1"),
        (["--batch-size", "x"], "--batch-size: expected a whole number"),
        (["--rdzv-id", ""], "--rdzv-id: needs an id"),
    ],
)
def test_bad_probe_options_are_one_line_exit_2(args: list[str], needle: str) -> None:
    proc = _run("probe", *args)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in proc.stderr

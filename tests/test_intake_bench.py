"""The intake bench (bench/intake.py): it runs on a slice, prints precision and recall for the
tuned and held-out phrases, and a malformed phrase file is one line, exit 2."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.conftest import PYTHON, REPO


def test_the_intake_bench_runs_on_a_slice() -> None:
    proc = subprocess.run(
        [PYTHON, "bench/intake.py", "--limit", "12"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    tuned = next(ln for ln in proc.stdout.splitlines() if ln.startswith("tuned "))
    assert "precision" in tuned and "recall" in tuned
    assert "heldout" in proc.stdout


def test_a_malformed_bench_file_is_one_line_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "phrases.yaml"
    bad.write_text("phrases:\n  - {text: 'x', yields: {no_such_fact: 1}}\n", encoding="utf-8")
    proc = subprocess.run(
        [PYTHON, "bench/intake.py", "--phrases", str(bad)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "phrases.yaml:2" in proc.stderr
    assert "no_such_fact" in proc.stderr and "Traceback" not in proc.stderr

"""bench/frameworks.py: bad input is one line and exit 2, before anything is launched."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "bench" / "frameworks.py"


def _bench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(BENCH), *args], capture_output=True, text=True, timeout=120
    )


def test_unknown_framework_is_one_line_and_exit_2() -> None:
    proc = _bench("--only-held-out", "--framework", "no-such-stack")
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "no-such-stack" in proc.stderr


def test_held_out_options_exclude_each_other() -> None:
    proc = _bench("--held-out", "--only-held-out")
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr


def test_rediagnose_without_kept_traces_is_one_line_and_exit_2(tmp_path: Path) -> None:
    missing = tmp_path / "never-kept"
    proc = _bench("--only-held-out", "--rediagnose", str(missing))
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "never-kept" in proc.stderr

"""``trace --out`` and ``probe --out`` never overwrite a folder's files, and two runs never
write into one folder (issue 30)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ddpadvisor.errors import InputError
from ddpadvisor.runs.outdir import LOCK, choose, claimed

HOLD = """
import sys
from pathlib import Path
from ddpadvisor.runs.outdir import claimed
with claimed(Path(sys.argv[1]), force=False, what="trace"):
    print("held", flush=True)
    sys.stdin.readline()
"""


def _cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ddpadvisor", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
    )


def test_the_default_folder_is_used_when_free_else_a_fresh_sibling(tmp_path: Path) -> None:
    default = tmp_path / "ddpadvisor-trace"
    assert choose(None, default) == default
    default.mkdir()
    assert choose(None, default) == default  # empty: used
    (default / "rank0.jsonl").write_text("{}\n")
    assert choose(None, default) == tmp_path / "ddpadvisor-trace-2"
    (tmp_path / "ddpadvisor-trace-2").mkdir()
    (tmp_path / "ddpadvisor-trace-2" / "mine.txt").write_text("x")
    assert choose(None, default) == tmp_path / "ddpadvisor-trace-3"
    assert choose(tmp_path / "given", default) == tmp_path / "given"


def test_a_folder_with_files_is_refused_unless_forced(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(InputError, match="--force"), claimed(tmp_path, force=False, what="trace"):
        pass
    with claimed(tmp_path, force=True, what="trace") as folder:
        assert folder == tmp_path
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_a_folder_another_run_holds_is_refused_even_forced(tmp_path: Path) -> None:
    with claimed(tmp_path / "out", force=False, what="trace"):
        assert (tmp_path / "out" / LOCK).exists()
        busy = pytest.raises(InputError, match="another ddpadvisor run")
        with busy, claimed(tmp_path / "out", force=True, what="trace"):
            pass
        assert choose(None, tmp_path / "out") == tmp_path / "out-2"
    with claimed(tmp_path / "out", force=False, what="trace"):  # free again, lock file ignored
        pass


@pytest.mark.parametrize("command", ["trace", "probe"])
def test_the_cli_refuses_a_folder_holding_the_users_files(tmp_path: Path, command: str) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "rank0.jsonl").write_text("my own file\n")
    (tmp_path / "train.py").write_text("")
    args = ["--out", str(out)] + (["--", str(tmp_path / "train.py")] if command == "trace" else [])
    proc = _cli(command, *args)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "--force" in lines[0] and str(out) in lines[0]
    assert (out / "rank0.jsonl").read_text() == "my own file\n"


def test_a_second_trace_into_a_folder_being_written_is_refused(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("")
    out = tmp_path / "out"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(out)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        proc = _cli("trace", "--force", "--out", str(out), "--", str(tmp_path / "train.py"))
        assert proc.returncode == 2, proc.stderr
        assert "another ddpadvisor run is writing into this folder" in proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1
    finally:
        holder.communicate("\n", timeout=30)

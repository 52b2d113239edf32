"""The run plumbing without torchrun: the reaper, the watch loop and torchrun's report.

Stand-in commands behave like torchrun does to its ranks: they start children in sessions of
their own (out of reach of a process-group kill), one of which ignores SIGTERM. Each writes
the pids to check into a file.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from ddpadvisor.runs import command, outcome
from ddpadvisor.runs.supervise import Supervised, kill_tree, watch

pytestmark = pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs Linux /proc")

# Like torchrun: two workers in their own sessions; worker 1 ignores SIGTERM; then EXIT.
LAUNCHER = """
import os, subprocess, sys, time
worker = "import signal, sys, time\\nif sys.argv[1] == '1': signal.signal(signal.SIGTERM, signal.SIG_IGN)\\ntime.sleep(600)"
kids = [subprocess.Popen([sys.executable, "-c", worker, str(i)], start_new_session=True) for i in (0, 1)]
with open(sys.argv[1] + ".tmp", "w") as fh:
    fh.write(" ".join(str(p) for p in [os.getpid()] + [k.pid for k in kids]))
os.replace(sys.argv[1] + ".tmp", sys.argv[1])
if sys.argv[2] == "wait":
    time.sleep(600)
sys.exit(int(sys.argv[2]))
"""


def _start_time(pid: int) -> str | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return None if fields[0] in ("Z", "X") else fields[19]


def _pids(path: Path) -> dict[int, str | None]:
    end = time.monotonic() + 60
    while not path.exists():
        assert time.monotonic() < end, "the stand-in never started"
        time.sleep(0.02)
    return {pid: _start_time(pid) for pid in map(int, path.read_text().split())}


def _alive(pids: dict[int, str | None], within: float = 5.0) -> list[int]:
    end = time.monotonic() + within
    while True:
        left = [p for p, t in pids.items() if t is not None and _start_time(p) == t]
        if not left or time.monotonic() > end:
            return left
        time.sleep(0.02)


def _launcher(tmp_path: Path, then: str) -> tuple[list[str], Path]:
    script = tmp_path / "launcher.py"
    script.write_text(LAUNCHER)
    pidfile = tmp_path / "pids"
    return [sys.executable, str(script), str(pidfile), then], pidfile


def test_leftovers_of_a_command_that_exited_are_killed_and_its_code_kept(tmp_path: Path) -> None:
    cmd, pidfile = _launcher(tmp_path, "7")
    run = Supervised(cmd, grace_s=0.5)
    ended = watch(run, deadline_s=None)
    assert ended.how == "exited" and ended.returncode == 7
    assert _alive(_pids(pidfile)) == []


def test_the_deadline_ends_the_tree_and_a_stall_says_why(tmp_path: Path) -> None:
    cmd, pidfile = _launcher(tmp_path, "wait")
    calls: list[str] = []
    run = Supervised(cmd, grace_s=0.5)
    ended = watch(run, deadline_s=0.5, before_stop=calls.append)
    assert ended.how == "deadline" and calls == ["deadline"]
    assert _alive(_pids(pidfile)) == []

    (tmp_path / "stall").mkdir()
    cmd, pidfile = _launcher(tmp_path / "stall", "wait")
    pids: dict[int, str | None] = {}

    def tick(_elapsed: float) -> str | None:
        if pidfile.exists() and not pids:
            pids.update(_pids(pidfile))
        return "rank 1 made no progress" if pids else None

    ended = watch(Supervised(cmd, grace_s=0.5), deadline_s=None, tick=tick)
    assert ended.how == "stalled" and ended.detail == "rank 1 made no progress"
    assert len(pids) == 3 and _alive(pids) == []


def test_the_command_killed_by_a_signal_is_reported_so() -> None:
    run = Supervised([sys.executable, "-c", "import os; os.kill(os.getpid(), 9)"])
    assert watch(run, deadline_s=None).returncode == -signal.SIGKILL


def test_sigkill_of_the_supervising_process_leaves_nothing(tmp_path: Path) -> None:
    cmd, pidfile = _launcher(tmp_path, "wait")
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                f"""
                from ddpadvisor.runs.supervise import Supervised, watch
                watch(Supervised({cmd!r}, grace_s=0.5), deadline_s=None)
                """
            ),
        ],
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    pids = _pids(pidfile)
    reaper = int(Path(f"/proc/{next(iter(pids))}/stat").read_text().rsplit(")", 1)[1].split()[1])
    pids[reaper] = _start_time(reaper)
    parent.kill()
    parent.wait()
    assert _alive(pids) == []


def test_kill_tree_reaches_children_in_other_sessions(tmp_path: Path) -> None:
    cmd, pidfile = _launcher(tmp_path, "wait")
    proc = subprocess.Popen(cmd)
    pids = _pids(pidfile)
    kill_tree(proc.pid)
    proc.wait()
    assert _alive(pids) == []


REPORT = """\
[rank0]: RuntimeError: Connection closed by peer
============================================================
train.py FAILED
------------------------------------------------------------
Failures:
[1]:
  time      : 2026-12-02_10:00:01
  host      : box
  rank      : 0 (local_rank: 0)
  exitcode  : 1 (pid: 41)
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-12-02_10:00:00
  host      : box
  rank      : 1 (local_rank: 1)
  exitcode  : -9 (pid: 42)
============================================================
"""


def test_torchrun_report_root_cause_first() -> None:
    assert outcome.failures(REPORT) == [outcome.RankExit(1, -9), outcome.RankExit(0, 1)]
    assert outcome.root_cause(REPORT) == outcome.RankExit(1, -9)
    assert outcome.root_cause("no report here") is None
    assert outcome.exit_words(-9) == "killed by SIGKILL" and outcome.exit_words(3) == "exit code 3"


RANK_TRACEBACK = """\
Traceback (most recent call last):
  File "/home/me/job/train.py", line 110, in <module>
    local_rank = init_distributed_mode()
  File "/home/me/job/utils.py", line 48, in init_distributed_mode
    dist.init_process_group(backend="nccl")
  File "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py", line 2181, in f
    raise RuntimeError("Distributed package doesn't have NCCL built in")
RuntimeError: Distributed package doesn't have NCCL built in
"""
LAUNCHER_TRACEBACK = """\
Traceback (most recent call last):
  File "/venv/lib/python3.11/site-packages/torch/distributed/run.py", line 1019, in run
    elastic_launch(
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
"""


def test_the_last_exception_of_the_job_and_its_own_frame() -> None:
    log = RANK_TRACEBACK + LAUNCHER_TRACEBACK + REPORT
    # torchrun's own ChildFailedError is skipped; library frames do not name the place
    assert outcome.last_exception(log) == (
        "RuntimeError: Distributed package doesn't have NCCL built in at utils.py:48"
    )
    assert outcome.last_exception(LAUNCHER_TRACEBACK + REPORT) is None
    assert outcome.last_exception("no traceback at all") is None
    bare = 'Traceback (most recent call last):\n  File "t.py", line 3, in <module>\nKeyboardInterrupt\n'
    assert outcome.last_exception(bare) == "KeyboardInterrupt at t.py:3"


@pytest.mark.parametrize(
    ("finished", "rc", "stopped", "teardown"),
    [
        (True, -6, False, True),  # the gloo abort at exit after every final record
        (True, 1, False, True),
        (True, 0, False, False),  # a clean exit is no crash at all
        (False, -6, False, False),  # a rank had not finished: a real failure
        (True, -15, True, False),  # we stopped it (deadline, stall, signal)
    ],
)
def test_teardown_crash_only_after_every_rank_finished(
    finished: bool, rc: int, stopped: bool, teardown: bool
) -> None:
    got = outcome.teardown_crash(every_rank_finished=finished, returncode=rc, stopped=stopped)
    assert got is teardown


def test_the_command_is_torchruns() -> None:
    one = command.torchrun_command(["-m", "pkg.train", "--lr", "1"], nproc=3)
    # torchrun's own module, run as `python -m` runs it, under the prelude that skips
    # Python's finalization once it is done
    assert one[1:5] == ["-c", command.FAST_EXIT, "-m", "torch.distributed.run"]
    assert "--standalone" in one
    assert one[one.index("--nproc_per_node") + 1] == "3"
    assert one[-4:] == ["-m", "pkg.train", "--lr", "1"]
    many = command.torchrun_command(["t.py"], nproc=1, nnodes=2, rdzv_endpoint="h:1", node_rank=1)
    assert "--standalone" not in many and many[many.index("--node_rank") + 1] == "1"


@pytest.mark.parametrize(
    ("code", "status", "said"),
    [
        ("pass", 0, ""),
        ("raise SystemExit(3)", 3, ""),
        ("raise SystemExit('bad usage')", 1, "bad usage"),
        ("raise RuntimeError('Root Cause here')", 1, "RuntimeError: Root Cause here"),
    ],
)
def test_the_fast_exit_prelude_keeps_the_modules_exit_status(
    tmp_path: Path, code: str, status: int, said: str
) -> None:
    (tmp_path / "mod_under_test.py").write_text(
        f"import atexit, sys\natexit.register(lambda: print('finalized'))\n"
        f"print('args', sys.argv[1:], flush=True)\nif __name__ == '__main__':\n    {code}\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", command.FAST_EXIT, "-m", "mod_under_test", "--x", "1"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert proc.returncode == status, proc.stderr
    assert "args ['--x', '1']" in proc.stdout and said in proc.stderr
    assert "finalized" not in proc.stdout  # Python's exit work is skipped

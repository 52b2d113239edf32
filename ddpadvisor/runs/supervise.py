"""The one owner of a run's process tree: start, watch (deadline, stall, signals), stop.

A run's command (torchrun) is started under ``reaper.py`` in a session of its own; the reaper
keeps every process of the run as its descendant and kills them all when asked (SIGTERM), when
ddpadvisor dies (even by SIGKILL) or when the command exits. :func:`watch` is the loop the
probe and trace launchers share: it ends the run when the deadline passes, when their ``tick``
reports a stall, or when ddpadvisor receives SIGINT, SIGTERM or SIGHUP, and always returns
with no process of the run left. Torch-free.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import IO, Any

from ddpadvisor.runs.reaper import descendants

REAPER = Path(__file__).resolve().parent / "reaper.py"
KILL_GRACE_S = 2.0  # SIGTERM, then SIGKILL for whatever is left after this long
POLL_S = 0.1
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

Ending = str  # "exited" | "deadline" | "stalled" | "signal"


def reaped_command(cmd: Sequence[str], grace_s: float = KILL_GRACE_S) -> list[str]:
    """``cmd`` run under the reaper, which ends its whole tree with it or with this process."""
    return [sys.executable, "-I", "-S", str(REAPER), str(os.getpid()), f"{grace_s:g}", "--", *cmd]


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


class StopSignals:
    """Turns SIGINT, SIGTERM and SIGHUP into a flag while a run is supervised.

    Handlers can only be set from the main thread; elsewhere (a test's worker thread) the
    process keeps its own handlers and the flag stays unset.
    """

    def __init__(self) -> None:
        self.received: int | None = None
        self._saved: dict[int, Any] = {}

    def _handler(self, signum: int, _frame: FrameType | None) -> None:
        if self.received is None:
            self.received = signum

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():
            for sig in STOP_SIGNALS:
                with contextlib.suppress(ValueError, OSError):
                    self._saved[sig] = signal.signal(sig, self._handler)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, old in self._saved.items():
            with contextlib.suppress(ValueError, OSError, TypeError):
                signal.signal(sig, old)
        self._saved.clear()


@contextlib.contextmanager
def stop_signals() -> Iterator[StopSignals]:
    with StopSignals() as flags:
        yield flags


class Supervised:
    """One run: ``cmd`` under the reaper, in its own session, stoppable as a whole."""

    def __init__(
        self,
        cmd: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        stdout: IO[bytes] | int | None = None,
        stderr: IO[bytes] | int | None = None,
        stdin: IO[bytes] | int | None = subprocess.DEVNULL,
        cwd: Path | None = None,
        grace_s: float = KILL_GRACE_S,
    ):
        self.cmd = list(cmd)
        self.grace_s = grace_s
        self.started = time.monotonic()
        self.proc: subprocess.Popen[bytes] = subprocess.Popen(
            reaped_command(self.cmd, grace_s),
            env=dict(env) if env is not None else None,
            stdout=stdout,
            stderr=stderr,
            stdin=stdin,
            cwd=cwd,
            start_new_session=True,  # no terminal signal reaches the run except through us
        )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def poll(self) -> int | None:
        return self.proc.poll()

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def stop(self) -> int | None:
        """End every process of the run (the reaper does it); returns the exit status."""
        if self.proc.poll() is None:
            with contextlib.suppress(OSError):
                self.proc.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=self.grace_s + 3.0)
        if self.proc.poll() is None:  # the reaper itself is stuck: do its work
            kill_tree(self.proc.pid)
            self.proc.wait()
        return self.proc.returncode

    def wait(self) -> int:
        return self.proc.wait()

    def workers_cpu_s(self) -> float:
        """CPU seconds used so far by the processes the command started (torchrun's ranks and
        their children), not by the command itself: a sign of life before ranks report."""
        ticks = 0
        for pid in descendants(self.proc.pid):
            fields = _stat(pid)
            if fields is None or int(fields[1]) == self.proc.pid:
                continue  # gone, or the command itself (torchrun's monitor loop)
            ticks += int(fields[11]) + int(fields[12])  # utime + stime
        return ticks / _CLOCK_TICKS


_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _stat(pid: int) -> list[str] | None:
    """Fields of /proc/PID/stat after the command name (state, ppid, …)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def kill_tree(root: int) -> None:
    """SIGKILL ``root`` and every descendant of it (the last resort)."""
    for _ in range(20):
        pids = [*descendants(root), root]
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        if not descendants(root):
            return
        time.sleep(0.05)


@dataclass
class Ended:
    """How a supervised run ended."""

    how: Ending  # exited | deadline | stalled | signal
    returncode: int | None
    seconds: float
    signum: int | None = None  # the signal ddpadvisor received, for how == "signal"
    detail: str = ""  # what the tick said when it reported a stall


def watch(
    run: Supervised,
    *,
    deadline_s: float | None,
    tick: Callable[[float], str | None] | None = None,
    before_stop: Callable[[Ending], None] | None = None,
    poll_s: float = POLL_S,
) -> Ended:
    """Wait for the run; end it on the deadline, a stall (``tick`` returns why) or a signal.

    ``tick(elapsed)`` runs every ``poll_s`` from the launch on; ``before_stop(how)`` runs just
    before a run that did not exit by itself is stopped (e.g. to ask ranks for their stacks).
    Whatever happens, even an exception in a callback, no process of the run is left.
    """
    how: Ending = "exited"
    detail = ""
    with stop_signals() as flags:
        try:
            while run.poll() is None:
                elapsed = run.elapsed()
                if flags.received is not None:
                    how = "signal"
                    break
                if deadline_s and elapsed > deadline_s:
                    how = "deadline"
                    break
                said = tick(elapsed) if tick is not None else None
                if said:
                    how, detail = "stalled", said
                    break
                # returns as soon as the run exits (Popen polls every 50 ms at most), not a
                # whole poll_s later
                with contextlib.suppress(subprocess.TimeoutExpired):
                    run.proc.wait(timeout=poll_s)
            if how != "exited" and before_stop is not None and how != "signal":
                before_stop(how)
        finally:
            rc = run.stop()
        signum = flags.received
    if tick is not None and how == "exited":
        tick(run.elapsed())
    return Ended(how, rc, round(run.elapsed(), 3), signum if how == "signal" else None, detail)

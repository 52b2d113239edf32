"""The keeper of one run's process tree; runs as ``python -I -S reaper.py PARENT GRACE -- CMD…``.

``supervise`` starts this file (standard library only, never imported by ddpadvisor) in its own
session; it starts CMD (torchrun) and stays its parent. On Linux it is a child subreaper, so
every process of the run, even one whose parent died, stays its descendant and can be found.
It ends the whole tree — SIGTERM to every descendant, then SIGKILL after GRACE seconds — when

- it receives SIGTERM, SIGINT or SIGHUP (how ddpadvisor stops a run),
- PARENT dies, even by SIGKILL (PR_SET_PDEATHSIG, and a check of the parent pid),
- CMD exits (nothing it left running, e.g. a rank that ignored torchrun's SIGTERM, survives).

It then exits as CMD did: with its exit code, or killed by the same signal.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
POLL_S = 0.05
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)

_stop: list[int] = []


def _prctl(option: int, value: int) -> None:
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)


def _pdeathsig_term() -> None:
    """In CMD before exec: SIGTERM when this keeper dies (torchrun then stops its ranks)."""
    _prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM))


def descendants(root: int) -> list[int]:
    """Live (non-zombie) descendants of ``root``, parents before children (Linux /proc)."""
    children: dict[int, list[int]] = {}
    dead: set[int] = set()
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for name in entries:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                stat = fh.read().decode(errors="replace")
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[-1].split()
        if len(fields) < 2:
            continue
        pid = int(name)
        children.setdefault(int(fields[1]), []).append(pid)
        if fields[0] in ("Z", "X"):
            dead.add(pid)
    found: list[int] = []
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.append(child)
                todo.append(child)
    return [p for p in found if p not in dead]


def _signal_all(pids: list[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, sig)


class Keeper:
    def __init__(self, parent: int, grace: float, cmd: list[str]):
        self.parent = parent
        self.grace = grace
        self.cmd = cmd
        self.child: subprocess.Popen[bytes] | None = None
        self.status: int | None = None  # waitpid status of CMD

    def reap(self) -> None:
        """Collect every exited child (orphans of the run are re-parented to us)."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if self.child is not None and pid == self.child.pid:
                self.status = status
                self.child.returncode = 0  # stop Popen from waiting on it again

    def parent_gone(self) -> bool:
        return os.getppid() != self.parent

    def teardown(self) -> None:
        """SIGTERM every process of the run, SIGKILL what is left after the grace time."""
        me = os.getpid()
        _signal_all(descendants(me), signal.SIGTERM)
        end = time.monotonic() + self.grace
        while time.monotonic() < end:
            self.reap()
            if not descendants(me):
                return
            time.sleep(POLL_S)
        for _ in range(100):  # new processes may appear while the others die
            left = descendants(me)
            if not left:
                break
            _signal_all(left, signal.SIGKILL)
            time.sleep(POLL_S / 5)
            self.reap()
        self.reap()

    def run(self) -> int:
        for sig in STOP_SIGNALS:
            signal.signal(sig, lambda signum, _frame: _stop.append(signum))
        _prctl(PR_SET_CHILD_SUBREAPER, 1)
        _prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM))
        if self.parent_gone() or _stop:
            return 128 + int(signal.SIGTERM)
        try:
            self.child = subprocess.Popen(self.cmd, preexec_fn=_pdeathsig_term)
        except OSError as exc:
            sys.stderr.write(f"ddpadvisor: cannot start {self.cmd[0]}: {exc}\n")
            return 127
        while self.status is None and not _stop and not self.parent_gone():
            time.sleep(POLL_S)
            self.reap()
        self.teardown()
        if self.status is None:
            self.reap()
        if self.status is None:
            return 128 + int(signal.SIGKILL)
        if os.WIFSIGNALED(self.status):
            return -os.WTERMSIG(self.status)
        return os.WEXITSTATUS(self.status)


def main(argv: list[str]) -> None:
    if len(argv) < 4 or argv[2] != "--":
        sys.stderr.write("usage: reaper.py PARENT_PID GRACE_S -- CMD...\n")
        os._exit(2)
    code = Keeper(int(argv[0]), float(argv[1]), argv[3:]).run()
    sys.stdout.flush()
    if code < 0:  # die as CMD died, so our parent sees the same signal
        for sig in STOP_SIGNALS:
            signal.signal(sig, signal.SIG_DFL)
        with contextlib.suppress(OSError, ValueError):  # SIGKILL and SIGSTOP have none
            signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
        time.sleep(1)
        os._exit(128 - code)
    os._exit(code)


if __name__ == "__main__":
    main(sys.argv[1:])

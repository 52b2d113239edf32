"""Reading how a run ended: torchrun's failure report, exit statuses, and teardown crashes.

torchrun ends a failed run with a report naming each failed rank and its exit code, the first
failure under "Root Cause". Under torch 2.13 with gloo, ``destroy_process_group()`` while a
DDP model is alive aborts the process at interpreter exit about one run in ten: the job's work
is complete and only the exit status says otherwise. :func:`teardown_crash` is the one rule
that tells such a crash from a real failure.
"""

from __future__ import annotations

import re
import signal
from dataclasses import dataclass

# "rank : 1 (local_rank: 1)" followed by "exitcode : 86 (pid: 42)".
_FAILURE = re.compile(
    r"rank\s*:\s*(\d+)\s*\(local_rank:\s*\d+\)\s*\n\s*exitcode\s*:\s*(-?\d+)", re.MULTILINE
)


@dataclass(frozen=True)
class RankExit:
    rank: int
    code: int  # negative: killed by that signal


def failures(log: str) -> list[RankExit]:
    """Each failed rank of torchrun's report, the root cause first.

    The report lists the ranks torchrun stopped before its "Root Cause" section, so that
    section is read first.
    """
    found = [RankExit(int(r), int(c)) for r, c in _FAILURE.findall(log)]
    cut = log.rfind("Root Cause")
    if cut < 0:
        return found
    roots = [RankExit(int(r), int(c)) for r, c in _FAILURE.findall(log[cut:])]
    return roots + [f for f in found if f not in roots]


def root_cause(log: str) -> RankExit | None:
    """The rank torchrun names as the first failure (None without a report)."""
    cut = log.rfind("Root Cause")
    if cut < 0:
        return None
    roots = failures(log[cut:])
    return roots[0] if roots else None


# A Python traceback's last line: "RuntimeError: ..." or "pkg.mod.SomeError: ..." (also bare).
_RAISED = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit))(?::\s*(.*))?$")
_FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+)')
# Frames of the launcher, torch, ddpadvisor's agent or an installed package point at nobody's
# training code; the innermost other frame is where the job's own code called in.
_LIBRARY = re.compile(r"(?:[/\\](?:site|dist)-packages[/\\]|[/\\]lib[/\\]python\d|<frozen )")


def last_exception(log: str) -> str | None:
    """The exception the job's last traceback in the log ends with, and the innermost frame
    of the job's own code, e.g. ``RuntimeError: no NCCL at trainer_utils.py:48``; torchrun's
    own report (ChildFailedError) is skipped. None when the log holds no traceback.

    A rank that fails before the agent can record anything (inside init_process_group) leaves
    only this in the log."""
    blocks = log.split("Traceback (most recent call last):")[1:]
    for block in reversed(blocks):
        lines = block.splitlines()
        raised = None
        where = None
        for line in lines:
            frame = _FRAME.match(line)
            if frame and not _LIBRARY.search(frame.group(1)):
                where = f"{frame.group(1).rsplit('/', 1)[-1]}:{frame.group(2)}"
            if frame is None and not line.startswith((" ", "\t")):
                m = _RAISED.match(line.strip())
                if m:
                    raised = m
                    break
        if raised is None or raised.group(1).endswith("ChildFailedError"):
            continue
        text = raised.group(1) + (f": {raised.group(2).strip()}" if raised.group(2) else "")
        return text[:300] + (f" at {where}" if where else "")
    return None


def exit_words(code: int) -> str:
    """``exit code 3`` / ``killed by SIGKILL``; -1 stands for a process seen gone."""
    if code == -1:
        return "process gone"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def teardown_crash(*, every_rank_finished: bool, returncode: int | None, stopped: bool) -> bool:
    """A nonzero exit that loses nothing: every rank recorded its final result, no rank
    recorded an error, and the run ended by itself (not by our deadline, stall or signal)."""
    return every_rank_finished and not stopped and returncode not in (0, None)

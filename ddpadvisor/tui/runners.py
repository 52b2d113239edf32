"""Probe and trace runs started from the TUI, behind a small protocol so tests inject fakes.

The real runners launch ``ddpadvisor probe …`` / ``ddpadvisor trace …`` under the reaper of
:mod:`ddpadvisor.runs.supervise` (the one owner of process trees), report each output line as
progress, and read the results back with the evidence readers. Cancelling the awaiting task
ends the whole tree, and so does the TUI dying: no process is left behind.
No textual here; the TUI wraps a runner in a worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol

from ddpadvisor.evidence.sources import RankRow, by_kind
from ddpadvisor.kb.model import KnowledgeBase
from ddpadvisor.observation import Gathered
from ddpadvisor.runs.supervise import kill_tree, reaped_command

RunKind = Literal["probe", "trace"]


@dataclass(frozen=True)
class RunRequest:
    kind: RunKind
    probes: tuple[str, ...] = ()  # empty: every probe
    script: Path | None = None
    script_args: tuple[str, ...] = ()
    nproc: int = 2
    backend: str = "auto"
    timeout_s: float = 300.0
    out_dir: Path | None = None

    def describe(self) -> str:
        from ddpadvisor.i18n import t

        if self.kind == "probe":
            names = " ".join(self.probes) or t("all probes")
            return t("probe {names} on {n} ranks", names=names, n=self.nproc)
        return t("trace {script} on {n} ranks", script=self.script, n=self.nproc)


@dataclass(frozen=True)
class RunProgress:
    done: int
    total: int | None  # None: unknown length, show activity only
    text: str


@dataclass
class RunOutcome:
    gathered: Gathered
    rows: list[RankRow] = field(default_factory=list)
    out_dir: Path | None = None
    failed: bool = False
    message: str = ""


ProgressFn = Callable[[RunProgress], None]


class Runner(Protocol):
    async def __call__(
        self, request: RunRequest, kb: KnowledgeBase, progress: ProgressFn
    ) -> RunOutcome: ...


def default_out_dir(kind: RunKind, base: Path | None = None) -> Path:
    """A fresh folder under ./ddpadvisor-runs so a second run never overwrites the first."""
    root = (base or Path.cwd()) / "ddpadvisor-runs"
    n = 1
    while (root / f"{kind}-{n}").exists():
        n += 1
    return root / f"{kind}-{n}"


def command_for(request: RunRequest, out_dir: Path) -> list[str]:
    cmd = [sys.executable, "-m", "ddpadvisor", request.kind]
    if request.kind == "probe":
        cmd += [*request.probes, "--nproc", str(request.nproc), "--backend", request.backend]
        cmd += ["--timeout", str(int(request.timeout_s)), "--out", str(out_dir)]
    else:
        if request.script is None:
            raise ValueError("a trace run needs a script")
        cmd += ["--nproc", str(request.nproc), "--out", str(out_dir), "--"]
        cmd += [str(request.script), *request.script_args]
    return cmd


class SubprocessRunner:
    """Runs the real ``ddpadvisor probe|trace`` command line."""

    def __init__(
        self,
        base_dir: Path | None = None,
        grace_s: float = 5.0,
        make_command: Callable[[RunRequest, Path], list[str]] = command_for,
    ):
        self.base_dir = base_dir
        self.grace_s = grace_s
        self.make_command = make_command  # tests substitute a stand-in process

    async def __call__(
        self, request: RunRequest, kb: KnowledgeBase, progress: ProgressFn
    ) -> RunOutcome:
        out_dir = request.out_dir or default_out_dir(request.kind, self.base_dir)
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        cmd = self.make_command(request, out_dir)
        total = len(request.probes) or None
        progress(RunProgress(0, total, f"starting: {request.describe()}"))
        proc = await asyncio.create_subprocess_exec(
            *reaped_command(cmd, self.grace_s),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,  # no terminal signal reaches the run except through us
        )
        finished: set[str] = set()
        tail: list[str] = []
        try:
            assert proc.stdout is not None
            async for raw in proc.stdout:
                line = raw.decode(errors="replace").rstrip()
                if not line:
                    continue
                tail = [*tail[-4:], line]
                m = _PROBE_DONE.match(line)
                if m:
                    finished.add(m.group(1))
                progress(RunProgress(len(finished), total, line))
            rc = await proc.wait()
        except asyncio.CancelledError:
            await self._kill(proc)
            raise
        return self._collect(request, kb, out_dir, rc, tail)

    async def _kill(self, proc: asyncio.subprocess.Process) -> None:
        """SIGTERM the reaper: it ends every process of the run (SIGKILL after the grace)."""
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(proc.wait(), self.grace_s + 3.0)
        if proc.returncode is None:  # the reaper itself is stuck: do its work
            kill_tree(proc.pid)
        await proc.wait()

    def _collect(
        self, request: RunRequest, kb: KnowledgeBase, out_dir: Path, rc: int, tail: list[str]
    ) -> RunOutcome:
        got = Gathered(failed=rc != 0)
        message = f"{request.kind} finished (exit {rc})"
        if rc != 0 and tail:
            message += f": {tail[-1]}"
        if out_dir.is_dir():
            try:
                got.extend(read_results(kb, request.kind, out_dir))
            except ImportError as exc:
                got.warnings.append(f"cannot read {request.kind} results in this build: {exc}")
            except Exception as exc:  # a reader's InputError or a half-written file
                got.warnings.append(f"{out_dir}: {exc}")
        rows = _rows(request.kind, out_dir)
        return RunOutcome(got, rows, out_dir, failed=got.failed, message=message)


def read_results(kb: KnowledgeBase, kind: RunKind, out_dir: Path) -> Gathered:
    source = by_kind(kind)
    assert source is not None
    return source.read(kb, out_dir)


def _rows(kind: RunKind, out_dir: Path | None) -> list[RankRow]:
    source = by_kind(kind)
    return source.rows(out_dir) if source is not None and source.rows is not None else []


# `ddpadvisor probe` prints one indented line per finished probe: "  sampler   0.03 s  …".
_PROBE_DONE = re.compile(r"^\s+([a-z][a-z0-9_]*)\s+[0-9.]+ s\b")

# -- per-rank tables: the registry's sources own their folders' formats ------------------------


def probe_rows(out_dir: Path | None) -> list[RankRow]:
    return _rows("probe", out_dir)


def trace_rows(out_dir: Path | None) -> list[RankRow]:
    return _rows("trace", out_dir)

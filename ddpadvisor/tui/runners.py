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
import json
import re
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol

from ddpadvisor.kb.model import KnowledgeBase
from ddpadvisor.observation import Gathered
from ddpadvisor.runs.supervise import kill_tree, reaped_command
from ddpadvisor.tui.trace_series import read_series

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


@dataclass(frozen=True)
class RankRow:
    """One line of the per-rank result table."""

    rank: str
    item: str
    value: str
    ok: bool | None = None  # None: informational


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
        rows = probe_rows(out_dir) if request.kind == "probe" else trace_rows(out_dir)
        return RunOutcome(got, rows, out_dir, failed=got.failed, message=message)


def read_results(kb: KnowledgeBase, kind: RunKind, out_dir: Path) -> Gathered:
    if kind == "probe":
        from ddpadvisor.evidence.probe_results import read_probe_results

        return read_probe_results(kb, out_dir)
    from ddpadvisor.evidence.trace_reader import read_trace

    return read_trace(kb, out_dir)


# `ddpadvisor probe` prints one indented line per finished probe: "  sampler   0.03 s  …".
_PROBE_DONE = re.compile(r"^\s+([a-z][a-z0-9_]*)\s+[0-9.]+ s\b")

# -- per-rank tables ---------------------------------------------------------------------------
# The probe result format belongs to ddpadvisor.probing: <out>/<probe>/rank<R>.json with the
# probe's status and a one-line summary. Files of another shape are read defensively: their
# scalar fields are listed, so the table survives a format change.

_RANK_IN_NAME = re.compile(r"rank[_-]?(\d+)")


def _rank_of(data: dict[str, object], path: Path) -> str | None:
    if isinstance(data.get("rank"), int) and not isinstance(data.get("rank"), bool):
        return str(data["rank"])
    m = _RANK_IN_NAME.search(path.stem)
    return m.group(1) if m else None  # not a per-rank file (e.g. the run's own record)


def _scalars(data: object, prefix: str = "", depth: int = 0) -> list[tuple[str, object]]:
    out: list[tuple[str, object]] = []
    if isinstance(data, dict) and depth < 3:
        for key, value in data.items():
            name = f"{prefix}.{key}" if prefix else str(key)
            if isinstance(value, (bool, int, float, str)) and value != "":
                out.append((name, value))
            elif isinstance(value, dict):
                out.extend(_scalars(value, name, depth + 1))
    return out


def probe_rows(out_dir: Path | None, limit: int = 200) -> list[RankRow]:
    """One row per rank and probe; other per-rank files (liveness status, unknown formats)
    only when no probe result is there, as their scalar fields."""
    if out_dir is None or not out_dir.is_dir():
        return []
    results: list[RankRow] = []
    other: list[RankRow] = []
    for path in sorted(out_dir.rglob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(data, dict):
            continue
        rank = _rank_of(data, path)
        if rank is None:
            continue
        if isinstance(data.get("probe"), str) and isinstance(data.get("status"), str):
            text = str(data.get("summary") or data.get("error") or data["status"])
            results.append(RankRow(rank, data["probe"], text[:120], data["status"] == "ok"))
            continue
        for name, value in _scalars(data):
            if name in ("rank", "world_size") or len(other) >= limit:
                continue
            text = str(value).lower() if isinstance(value, bool) else str(value)
            ok = value if isinstance(value, bool) and _is_check(name) else None
            other.append(RankRow(rank, name, text[:60], ok))
    return results[:limit] or other


def _is_check(name: str) -> bool:
    leaf = name.rsplit(".", 1)[-1]
    return leaf in ("ok", "passed", "match", "matches", "correct") or leaf.endswith(
        ("_ok", "_match", "_matches", "_correct")
    )


def trace_rows(out_dir: Path | None) -> list[RankRow]:
    if out_dir is None or not out_dir.is_dir():
        return []
    series = read_series(out_dir)
    rows = []
    for rank in series.ranks():
        steps = series.steps(rank)
        rows.append(RankRow(str(rank), "steps recorded", str(steps)))
        for name in ("loss", "grad_norm", "scale"):
            points = series.series.get(name, {}).get(rank)
            if points:
                rows.append(RankRow(str(rank), f"last {name}", f"{points[-1][1]:.4g}"))
    return rows

"""Trace runs: the trace specifics on top of :mod:`ddpadvisor.runs`.

A training script runs under ``python -m torch.distributed.run`` with the trace agent on its
``PYTHONPATH``; :mod:`ddpadvisor.runs.supervise` owns the process tree. This module streams the
job's output (to the terminal and to ``torchrun.log``), watches the per-rank progress files
the agent keeps up to date and reports a stall — from the launch on — when no rank made
progress for ``stall`` seconds. Before a stalled job is stopped every rank is asked for its
Python stacks (SIGUSR1, which the agent routes to ``faulthandler``) so the reader can tell the
rank that hung from the ranks waiting for it. No process outlives :func:`run_traced`.

This module is torch-free; torch runs only in the launched processes.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO

from ddpadvisor.evidence.sources.rankfiles import is_trace_file, rank_files
from ddpadvisor.evidence.trace.load import rank_records
from ddpadvisor.runs import command, outcome
from ddpadvisor.runs.supervise import Ended, Supervised, signal_name, watch
from ddpadvisor.tracing import ENV_DIR, ENV_EVERY, ENV_MAX_STEPS, agent_dir

DEFAULT_TIMEOUT_S = 3600.0
DEFAULT_STALL_S = 300.0


@dataclass
class Failure:
    kind: str  # crashed | killed | hung | timeout | launch
    ranks: list[int]
    message: str


@dataclass
class RunResult:
    status: str  # ok | failed
    returncode: int | None
    seconds: float
    nproc: int
    command: list[str]
    failure: Failure | None = None
    warnings: list[str] = field(default_factory=list)
    signum: int | None = None  # the signal that interrupted the run
    # where the job ran: a rank that fails before the agent writes its start record leaves
    # only this and ``command`` to find the training script by
    cwd: str = field(default_factory=os.getcwd)

    def to_json(self) -> dict[str, object]:
        return asdict(self)


def prepare_dir(out: Path) -> None:
    """Create the output folder and remove a previous trace's files from it."""
    out.mkdir(parents=True, exist_ok=True)
    for path in out.iterdir():
        if path.is_file() and is_trace_file(path.name):  # the agent's and launcher's files
            path.unlink()


def agent_env(out: Path, every: int, max_steps: int | None, base: dict[str, str]) -> dict[str, str]:
    """The environment that enables the agent: its folder first on PYTHONPATH, and the knobs."""
    env = dict(base)
    parts = [str(agent_dir())] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(parts)
    env[ENV_DIR] = str(out.resolve())
    env[ENV_EVERY] = str(every)
    if max_steps:
        env[ENV_MAX_STEPS] = str(max_steps)
    else:
        env.pop(ENV_MAX_STEPS, None)
    return env


def torchrun_command(nproc: int, target: list[str]) -> list[str]:
    return command.torchrun_command(target, nproc=nproc)


def _progress(out: Path) -> dict[int, dict[str, object]]:
    found: dict[int, dict[str, object]] = {}
    for rank, path in rank_files(out, "progress"):
        try:
            found[rank] = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
    return found


def _counters(p: dict[str, object]) -> tuple[object, ...]:
    return (p.get("step"), p.get("fwd"), p.get("bwd"), p.get("buckets"), p.get("phase"))


class _Output:
    """Copies the job's output to the log (and the terminal); counts what it has seen."""

    def __init__(self, stream: IO[bytes], log: IO[bytes], echo: IO[bytes] | None):
        self.seen = 0
        self.thread = threading.Thread(target=self._pump, args=(stream, log, echo), daemon=True)
        self.thread.start()

    def _pump(self, stream: IO[bytes], log: IO[bytes], echo: IO[bytes] | None) -> None:
        for line in iter(stream.readline, b""):
            self.seen += len(line)
            log.write(line)
            log.flush()
            if echo is not None:
                with contextlib.suppress(OSError, ValueError):
                    echo.write(line)
                    echo.flush()


class _StallWatch:
    """From the launch on: no rank's counters changed for ``stall`` seconds is a stall.

    Until every rank writes progress (start-up, imports, loading, init_process_group) the
    job's output and the CPU time its ranks use count as signs of life too; afterwards only
    steps, forwards, backwards and buckets do (a rank waiting in a collective may spin).
    """

    BUSY_S = 0.2  # CPU seconds the ranks must use between two checks to count as alive

    def __init__(
        self,
        out: Path,
        nproc: int,
        stall: float | None,
        output: _Output,
        cpu: Callable[[], float] | None = None,
    ):
        self.out = out
        self.nproc = nproc
        self.stall = stall
        self.output = output
        self.cpu = cpu
        self.last_change = 0.0
        self.last_seen: dict[int, tuple[object, ...]] = {}
        self.last_bytes = 0
        self.last_cpu = 0.0

    def __call__(self, elapsed: float) -> str | None:
        progress = _progress(self.out)
        seen = {rank: _counters(p) for rank, p in progress.items()}
        starting = len(progress) < self.nproc
        alive = False
        if starting:
            alive = self.output.seen != self.last_bytes
            self.last_bytes = self.output.seen
            if self.cpu is not None:
                used = self.cpu()
                if used - self.last_cpu >= self.BUSY_S or used < self.last_cpu:
                    alive = True
                    self.last_cpu = used
        if seen != self.last_seen or alive:
            self.last_seen = seen
            self.last_change = elapsed
            return None
        if self.stall and elapsed - self.last_change > self.stall:
            return f"no progress for {self.stall:g} s"
        return None


def run_traced(
    target: list[str],
    out: Path,
    *,
    nproc: int = 2,
    every: int = 50,
    max_steps: int | None = None,
    timeout: float | None = DEFAULT_TIMEOUT_S,
    stall: float | None = DEFAULT_STALL_S,
    echo: bool = True,
    env: dict[str, str] | None = None,
) -> RunResult:
    """Launch, watch and end the traced run; write ``meta.json``; never leave a process.

    ``timeout`` (seconds from the launch; None or 0: none) and ``stall`` end the run as
    failed; SIGINT, SIGTERM or SIGHUP received meanwhile end it as interrupted.
    """
    prepare_dir(out)
    cmd = torchrun_command(nproc, target)
    run_env = agent_env(out, every, max_steps, dict(os.environ if env is None else env))
    log = open(out / "torchrun.log", "wb")  # noqa: SIM115
    try:
        run = Supervised(cmd, env=run_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    except OSError as exc:
        log.close()
        result = RunResult("failed", None, 0.0, nproc, cmd, Failure("launch", [], str(exc)))
        write_meta(out, result)
        return result
    assert run.proc.stdout is not None
    output = _Output(run.proc.stdout, log, sys.stdout.buffer if echo else None)
    try:
        ended = watch(
            run,
            deadline_s=timeout or None,
            tick=_StallWatch(out, nproc, stall, output, run.workers_cpu_s),
            before_stop=lambda _how: _dump_stacks(out),
        )
    finally:
        output.thread.join(timeout=5)
        log.close()
    result = classify_ended(out, ended, nproc, cmd, stall)
    write_meta(out, result)
    return result


def _dump_stacks(out: Path) -> None:
    """Ask each rank for its Python stacks before the kill (the agent registered SIGUSR1)."""
    pids = [p.get("pid") for p in _progress(out).values()]
    for pid in pids:
        if isinstance(pid, int):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGUSR1)
    if pids:
        time.sleep(1.0)


def write_meta(out: Path, result: RunResult) -> None:
    (out / "meta.json").write_text(json.dumps(result.to_json(), indent=2) + "\n")


# ------------------------------------------------------------------------ classification


def _rank_records(out: Path) -> dict[int, list[dict[str, object]]]:
    """Each rank's records of its last run (a file may hold earlier runs appended)."""
    return rank_records(out)


def _finished(records: list[dict[str, object]]) -> bool:
    return any(r.get("k") in ("end", "destroy", "final") for r in records) and not any(
        r.get("k") == "exception" for r in records
    )


def classify_ended(
    out: Path, ended: Ended, nproc: int, command: list[str], stall: float | None
) -> RunResult:
    """The verdict on a supervised run (see :func:`classify`)."""
    interrupted = signal_name(ended.signum) if ended.signum is not None else None
    result = classify(
        out,
        ended.returncode,
        ended.seconds,
        nproc,
        command,
        ended.how == "stalled",
        ended.how == "deadline",
        stall,
        interrupted=interrupted,
    )
    result.signum = ended.signum
    return result


def classify(
    out: Path,
    returncode: int | None,
    seconds: float,
    nproc: int,
    command: list[str],
    stalled: bool,
    timed_out: bool,
    stall: float | None,
    *,
    interrupted: str | None = None,
) -> RunResult:
    """Turn the exit status, the rank files and torchrun's report into a verdict."""
    records = _rank_records(out)
    progress = _progress(out)
    result = RunResult("ok", returncode, seconds, nproc, command)
    if interrupted:
        result.status = "failed"
        result.failure = Failure(
            "interrupted",
            [],
            f"interrupted by {interrupted} after {seconds:.1f} s; every process of the run "
            "was stopped",
        )
        return result
    if stalled or timed_out:
        what = f"no progress for {stall:g} s" if stalled else "the time limit was reached"
        result.status = "failed"
        silent = [r for r in range(nproc) if r not in progress]
        if silent:  # hung before (or in) init_process_group: the agent never reported
            names = ", ".join(map(str, silent))
            how = (
                "no rank got through init_process_group"
                if len(silent) == nproc
                else f"rank(s) {names} never got through init_process_group"
            )
            result.failure = Failure("hung" if stalled else "timeout", silent, f"{what}; {how}")
            return result
        hung = _hung_ranks(out, progress)
        where = [f"rank {r} at {at}" for r in hung if (at := _stack_top(out, r))]
        result.failure = Failure(
            "hung" if stalled else "timeout",
            hung,
            f"{what}; rank(s) {', '.join(map(str, hung)) or '?'} stopped first"
            + (f" ({'; '.join(where)})" if where else ""),
        )
        return result
    if returncode == 0:
        missing = [r for r in range(nproc) if r not in records]
        if len(missing) == nproc:
            result.warnings.append(
                "no rank wrote a trace: does the script call torch.distributed.init_process_group?"
            )
        return result
    text = ""
    with contextlib.suppress(OSError):
        text = (out / "torchrun.log").read_text(errors="replace")
    root = outcome.root_cause(text)
    exceptions = {
        rank: rec for rank, recs in records.items() for rec in recs if rec.get("k") == "exception"
    }
    finished = len(records) >= nproc and all(_finished(r) for r in records.values())
    if outcome.teardown_crash(
        every_rank_finished=finished and not exceptions, returncode=returncode, stopped=False
    ):
        # Every rank had finished its work: a crash in interpreter teardown (a known gloo
        # quirk when a DDP model outlives destroy_process_group) loses nothing.
        who = f"rank {root.rank}" if root else "a rank"
        result.warnings.append(
            f"{who} exited with {outcome.exit_words(root.code if root else returncode or 1)} after "
            "finishing its work (teardown crash); the trace is complete"
        )
        return result
    result.status = "failed"
    # torchrun names the first rank that failed; without its report, the earliest exception.
    # Exceptions on the other ranks are usually peers losing their connection to it.
    rank: int | None
    if root:
        rank, code = root.rank, root.code
    elif exceptions:
        rank = min(exceptions, key=lambda r: float(str(exceptions[r].get("wall") or 0.0)))
        code = 1
    else:
        rank = None
        code = returncode or 1
    if rank is not None and rank in exceptions:
        rec = exceptions[rank]
        result.failure = Failure(
            "crashed",
            [rank],
            f"rank {rank} raised {rec.get('type')}: {rec.get('msg')} at {rec.get('where')} "
            f"(step {rec.get('s')})",
        )
    elif rank is not None:
        step = _last_step(records.get(rank, []))
        how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
        # no exception record (it failed before the agent could write one): the log's
        # traceback still says why
        raised = outcome.last_exception(text) if code > 0 else None
        result.failure = Failure(
            "killed" if code < 0 else "crashed",
            [rank],
            f"rank {rank} {how} (after step {step})" + (f": {raised}" if raised else ""),
        )
    else:
        unfinished = [r for r in range(nproc) if not _finished(records.get(r, []))]
        result.failure = Failure(
            "crashed",
            unfinished,
            f"torchrun exited with code {returncode}; unfinished rank(s): "
            + (", ".join(map(str, unfinished)) or "?"),
        )
    left = _left_early(records)
    if left and result.failure is not None and not set(left) & set(result.failure.ranks):
        # A rank that ended on its own (sys.exit(0), a return from main) while its peers
        # still trained: their failure (a peer closed the connection) follows from it.
        first = left[0]
        end = _end(records[first]) or {}
        result.failure = Failure(
            "crashed",
            [*left, *result.failure.ranks],
            f"rank {first} left the run early: its script ended after step {end.get('s', 0)} "
            f"while the other ranks were still training; then {result.failure.message}",
        )
    return result


def _end(records: list[dict[str, object]]) -> dict[str, object] | None:
    ends = [r for r in records if r.get("k") == "end"]
    return ends[-1] if ends else None


def _passes(records: list[dict[str, object]]) -> int:
    """Forward passes a rank made (its end record, else its last step's count)."""
    end = _end(records)
    if end is not None:
        return int(str(end.get("fwd") or 0))
    return max((int(str(r.get("s") or 0)) for r in records if r.get("k") == "step"), default=0)


def _left_early(records: dict[int, list[dict[str, object]]]) -> list[int]:
    """Ranks that ended cleanly with fewer forward passes than a rank that then failed."""
    failed = [recs for recs in records.values() if not _finished(recs)]
    if not failed:
        return []
    most = max(_passes(recs) for recs in failed)
    return sorted(
        rank
        for rank, recs in records.items()
        if _finished(recs) and _end(recs) is not None and _passes(recs) < most
    )


def _last_step(records: list[dict[str, object]]) -> object:
    steps = [r.get("s") for r in records if r.get("k") == "step"]
    return steps[-1] if steps else 0


_WAITING = ("torch/distributed", "torch/autograd", "torch/nn/parallel", "ddpadvisor_trace_agent")


_FRAME = re.compile(r'File "([^"]+)", line (\d+) in (\S+)')


def _stack_top(out: Path, rank: int) -> str | None:
    """Innermost frame of the rank's main thread outside the agent, from its SIGUSR1 dump."""
    try:
        text = (out / f"rank{rank}.stack").read_text(errors="replace")
    except OSError:
        return None
    blocks = [b for b in text.split("\n\n") if b.startswith("Current thread")]
    if not blocks:
        return None
    for path, line, func in _FRAME.findall(blocks[-1]):
        if "ddpadvisor_trace_agent" not in path:
            return f"{Path(path).name}:{line} in {func}"
    return None


def _hung_ranks(out: Path, progress: dict[int, dict[str, object]]) -> list[int]:
    """The rank(s) that stopped first: least progress, else not waiting in a collective."""
    if not progress:
        return []

    def key(p: dict[str, object]) -> tuple[int, ...]:
        return tuple(int(str(p.get(k) or 0)) for k in ("step", "fwd", "bwd", "buckets"))

    keys = {rank: key(p) for rank, p in progress.items()}
    low = min(keys.values())
    behind = sorted(rank for rank, k in keys.items() if k == low)
    if len(behind) < len(keys):
        return behind
    not_waiting = []
    for rank in behind:
        stack = ""
        with contextlib.suppress(OSError):
            stack = (out / f"rank{rank}.stack").read_text(errors="replace")
        main = stack.split("\n\n")[-1] if stack else ""
        if stack and not any(mark in main for mark in _WAITING):
            not_waiting.append(rank)
    return not_waiting or behind

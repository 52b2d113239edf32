"""Probe runs: the probe specifics on top of :mod:`ddpadvisor.runs`.

torchrun starts the workers; :mod:`ddpadvisor.runs.supervise` owns the process tree. This
module shows progress from the files the ranks write (``OUT/status/rank<k>.json`` and
``OUT/<probe>/rank<k>.json``), and afterwards works out which rank hung, crashed or raised.
It never imports torch.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TextIO

from ddpadvisor.bundled import probe_catalog
from ddpadvisor.evidence.sources.rankfiles import rank_of
from ddpadvisor.runs import command, outcome
from ddpadvisor.runs.supervise import Ended, Supervised, signal_name, watch

POLL_S = 0.1

_TIMEOUT_WORDS = re.compile(r"timed out|timeout|time out|failed to pass monitoredbarrier", re.I)
# A rank that loses its peer mid-collective reports it; the peer is the one to blame.
_PEER_LOST_WORDS = re.compile(
    r"connection closed by peer|connection reset|broken pipe|pair closure|remote worker|"
    r"communicator was aborted|socket closed",
    re.I,
)
_BARRIER_MISSING = re.compile(r"Ranks? ([\d, ]+) failed to pass monitoredBarrier", re.I)
_RANK_LOG_TIMEOUT = re.compile(r"\[rank(\d+)\]:.*(?:timed out|timeout)", re.I)


@dataclass
class LaunchSpec:
    probes: list[str]
    out: Path
    nproc: int = 2
    backend: str = "auto"
    deadline_s: float = 300.0
    collective_timeout_s: float = 60.0
    nnodes: int = 1
    node_rank: int | None = None
    rdzv_endpoint: str | None = None
    rdzv_id: str | None = None
    probe_args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    python: str = sys.executable
    runner: Path | None = None  # probes/run_all.py; found in the bundled probes/ by default

    @property
    def world_size(self) -> int:
        return self.nproc * self.nnodes


@dataclass
class RankOutcome:
    rank: int
    kind: str  # ok | hung | crashed | error | waited | stopped | missing
    probe: str | None
    detail: str


@dataclass
class LaunchResult:
    exit_code: int
    failed: bool
    seconds: float
    torchrun_exit_code: int | None
    deadline_hit: bool
    ranks: list[RankOutcome]
    culprits: list[RankOutcome]
    message: str
    teardown_crash_ignored: bool = False
    probes_done: list[str] = field(default_factory=list)
    interrupted: str | None = None  # the signal that stopped the run (e.g. "SIGTERM")


def runner_path() -> Path:
    from ddpadvisor.bundled import bundled_dir

    return bundled_dir("probes") / "run_all.py"


def torchrun_command(spec: LaunchSpec) -> list[str]:
    runner = [str(spec.runner or runner_path()), "--probes", ",".join(spec.probes)]
    runner += ["--out", str(spec.out), "--backend", spec.backend]
    runner += ["--timeout", f"{spec.collective_timeout_s:g}", *spec.probe_args]
    return command.torchrun_command(
        runner,
        nproc=spec.nproc,
        python=spec.python,
        nnodes=spec.nnodes,
        node_rank=spec.node_rank,
        rdzv_endpoint=spec.rdzv_endpoint,
        rdzv_id=spec.rdzv_id or "ddpadvisor-probe",
    )


# ---------------------------------------------------------------- reading what ranks wrote


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _rank_of(path: Path) -> int | None:
    return rank_of(path.name, "json")


def read_statuses(out: Path) -> dict[int, dict[str, Any]]:
    found = {}
    for path in (out / "status").glob("rank*.json"):
        rank = _rank_of(path)
        data = _read_json(path)
        if rank is not None and data is not None:
            found[rank] = data
    return found


def _results(out: Path, probe: str) -> dict[int, dict[str, Any]]:
    found = {}
    for path in (out / probe).glob("rank*.json"):
        rank = _rank_of(path)
        data = _read_json(path)
        if rank is not None and data is not None:
            found[rank] = data
    return found


def clear_previous(out: Path, probes: list[str]) -> None:
    """Remove what an earlier run left in OUT, so stale files never pass for new results."""
    for sub in ["status", *probe_catalog(), *probes]:
        folder = out / sub
        if folder.is_dir():
            for path in folder.glob("rank*.json*"):
                with contextlib.suppress(OSError):
                    path.unlink()
    for path in out.glob("run*.json"):
        with contextlib.suppress(OSError):
            path.unlink()


def _alive(pid: int) -> bool:
    """Whether pid runs (a zombie is dead for our purposes)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError):
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    return True


# ---------------------------------------------------------------- explaining the outcome


_exit_words = outcome.exit_words


def classify(
    world_size: int,
    statuses: dict[int, dict[str, Any]],
    log: str,
    deadline_hit: bool,
    deadline_s: float,
    expect_all: bool = True,
    deaths: dict[int, float] | None = None,
) -> list[RankOutcome]:
    """One outcome per rank: who finished, who hung, who crashed, who only waited.

    ``deaths`` maps ranks to when their process was seen gone without a result; the first
    of them stands in for torchrun's root cause when its report cannot be parsed.
    """
    failures = [(f.rank, f.code) for f in outcome.failures(log)]
    root = failures[0] if failures else None
    someone_raised = any(s.get("state") == "failed" for s in statuses.values())
    if root is None and deaths and not deadline_hit and not someone_raised:
        first = min(deaths, key=lambda r: deaths[r])
        root = (first, -1)
    exit_codes = dict(failures)
    barrier_missing: set[int] = set()
    for recorded in statuses.values():
        m = _BARRIER_MISSING.search(str(recorded.get("error") or ""))
        if m:
            barrier_missing |= {int(x) for x in re.findall(r"\d+", m.group(1))}
    log_timeouts = {int(r) for r in _RANK_LOG_TIMEOUT.findall(log)}

    outcomes: dict[int, RankOutcome] = {}
    ranks = range(world_size) if expect_all else sorted(statuses)
    for rank in ranks:
        status: dict[str, Any] | None = statuses.get(rank)
        probe = status.get("probe") if status else None
        where = f" in probe {probe}" if probe else " before the first probe"
        if status is None:
            outcomes[rank] = RankOutcome(rank, "missing", None, "never started (no status file)")
        elif status.get("state") == "done":
            outcomes[rank] = RankOutcome(rank, "ok", None, "finished every probe")
        elif status.get("state") == "failed":
            error = str(status.get("error") or "failed")
            if _TIMEOUT_WORDS.search(error):
                detail = f"timed out waiting for another rank{where}: {error}"
                outcomes[rank] = RankOutcome(rank, "waited", probe, detail)
            elif _PEER_LOST_WORDS.search(error):
                detail = f"lost its connection to another rank{where}: {error}"
                outcomes[rank] = RankOutcome(rank, "waited", probe, detail)
            else:
                outcomes[rank] = RankOutcome(rank, "error", probe, f"raised{where}: {error}")
        elif rank in log_timeouts and rank not in barrier_missing:
            detail = f"timed out waiting for another rank{where} (see torchrun.log)"
            outcomes[rank] = RankOutcome(rank, "waited", probe, detail)
        elif not deadline_hit and (
            (root and root[0] == rank and root[1] != 0) or exit_codes.get(rank, 0) > 0
        ):
            # A positive exit code is the worker's own doing: torchrun stops the others with a
            # signal. Under load torchrun may report a peer that timed out as the root cause.
            code = root[1] if root and root[0] == rank else exit_codes[rank]
            detail = f"died{where} ({_exit_words(code)}) without recording an error"
            outcomes[rank] = RankOutcome(rank, "crashed", probe, detail)
        else:
            outcomes[rank] = RankOutcome(rank, "stuck", probe, "")
    for rank in barrier_missing:
        if rank in outcomes and outcomes[rank].kind in ("stuck", "missing", "stopped"):
            outcomes[rank].kind = "stuck"
    someone_waited = any(o.kind == "waited" for o in outcomes.values()) or bool(barrier_missing)
    crashed = [o.rank for o in outcomes.values() if o.kind in ("crashed", "error")]
    for o in outcomes.values():
        if o.kind != "stuck" and not (o.kind == "missing" and deadline_hit):
            continue
        where = f" in probe {o.probe}" if o.probe else " before the first probe"
        if deadline_hit:
            o.kind = "hung"
            o.detail = f"still running{where} when the {deadline_s:g} s deadline passed"
        elif someone_waited and not crashed:
            o.kind = "hung"
            o.detail = f"never finished{where}; the other ranks timed out waiting for it"
        else:
            o.kind = "stopped"
            cause = f" after rank {crashed[0]} failed" if crashed else ""
            stopped_code = exit_codes.get(o.rank)
            o.detail = f"stopped by torchrun{where}{cause}" + (
                f" ({_exit_words(stopped_code)})" if stopped_code is not None else ""
            )
    return [outcomes[r] for r in sorted(outcomes)]


def pick_culprits(outcomes: list[RankOutcome]) -> list[RankOutcome]:
    """The ranks to blame: those that hung, crashed or raised; else those that timed out."""
    blamed = [o for o in outcomes if o.kind in ("hung", "crashed", "error", "missing")]
    if blamed:
        return blamed
    return [o for o in outcomes if o.kind in ("waited", "stopped")]


# ---------------------------------------------------------------- the launch


class _Progress:
    """Prints one line per probe as soon as every rank has written its result."""

    def __init__(self, spec: LaunchSpec, stream: TextIO | None):
        self.spec = spec
        self.stream = stream
        self.reported: set[str] = set()
        self.failed_reported: set[int] = set()
        self.started_reported = False
        self.width = max(len(p) for p in spec.probes)

    def say(self, text: str) -> None:
        if self.stream is not None:
            self.stream.write(text + "\n")
            self.stream.flush()

    def poll(self, elapsed: float, statuses: dict[int, dict[str, Any]]) -> None:
        expected = self.spec.world_size
        if not self.started_reported and len(statuses) >= expected:
            self.started_reported = True
            self.say(f"  {expected} rank(s) started after {elapsed:.1f} s")
        for rank, status in sorted(statuses.items()):
            if status.get("state") == "failed" and rank not in self.failed_reported:
                self.failed_reported.add(rank)
                probe = status.get("probe") or "startup"
                self.say(f"  rank {rank} FAILED in {probe}: {status.get('error')}")
        for probe in self.spec.probes:
            if probe in self.reported:
                continue
            results = _results(self.spec.out, probe)
            if len(results) < expected:
                return  # probes finish in order
            self.reported.add(probe)
            first = results[min(results)]
            seconds = max(float(r.get("seconds") or 0.0) for r in results.values())
            errors = [r for r in results.values() if r.get("status") != "ok"]
            note = f"ERROR on rank {errors[0]['rank']}" if errors else first.get("summary", "")
            self.say(f"  {probe:<{self.width}}  {seconds:6.2f} s  {note}")


def launch(spec: LaunchSpec, progress: TextIO | None = sys.stderr) -> LaunchResult:
    """Run the probes; never raises for a failed run (the result says what happened).

    SIGINT, SIGTERM or SIGHUP received meanwhile stop the run (no process is left) and give
    exit code 128 + the signal's number.
    """
    spec.out.mkdir(parents=True, exist_ok=True)
    if spec.nnodes == 1 or spec.node_rank == 0:
        clear_previous(spec.out, spec.probes)
    env = {**os.environ, **spec.env}
    env.setdefault("OMP_NUM_THREADS", "1")  # what torchrun would set, without its banner
    cmd = torchrun_command(spec)
    log_path = spec.out / (
        "torchrun.log" if spec.nnodes == 1 else f"torchrun-{socket.gethostname()}-{os.getpid()}.log"
    )
    show = _Progress(spec, progress)
    show.say(
        f"ddpadvisor probe: {', '.join(spec.probes)} on {spec.world_size} rank(s), backend "
        f"{spec.backend}, deadline {spec.deadline_s:g} s -> {spec.out}"
    )
    deaths: dict[int, float] = {}
    host = socket.gethostname()

    def tick(elapsed: float) -> None:
        statuses = read_statuses(spec.out)
        for rank, status in statuses.items():
            running = status.get("state") in ("starting", "running")
            local = status.get("host") == host and rank not in deaths
            if running and local and not _alive(int(status.get("pid", 0))):
                deaths[rank] = elapsed
        show.poll(elapsed, statuses)

    def before_stop(how: str) -> None:
        show.say(f"  deadline of {spec.deadline_s:g} s passed: stopping every rank")

    with open(log_path, "wb") as log:
        try:
            run = Supervised(cmd, env=env, stdout=log, stderr=log, stdin=None)
        except OSError as exc:
            ended = Ended("exited", None, 0.0)
            log.write(f"cannot start torchrun: {exc}\n".encode())
        else:
            ended = watch(run, deadline_s=spec.deadline_s, tick=tick, before_stop=before_stop)
    deadline_hit = ended.how == "deadline"
    interrupted = signal_name(ended.signum) if ended.signum is not None else None
    seconds = ended.seconds
    statuses = read_statuses(spec.out)
    show.poll(seconds, statuses)
    log_text = log_path.read_text(encoding="utf-8", errors="replace")
    rc = ended.returncode
    outcomes = classify(
        spec.world_size,
        statuses,
        log_text,
        deadline_hit,
        spec.deadline_s,
        expect_all=spec.nnodes == 1,
        deaths=deaths,
    )
    all_done = bool(outcomes) and all(o.kind == "ok" for o in outcomes)
    teardown_crash = outcome.teardown_crash(
        every_rank_finished=all_done, returncode=rc, stopped=ended.how != "exited"
    )
    failed = ended.how != "exited" or not all_done or (rc != 0 and not teardown_crash)
    culprits = pick_culprits(outcomes) if failed and not interrupted else []
    if interrupted:
        message = (
            f"probe run interrupted by {interrupted} after {seconds:.1f} s; every process "
            "of the run was stopped"
        )
    elif failed:
        named = "; ".join(f"rank {o.rank} {o.detail}" for o in culprits) or (
            f"torchrun exited with {_exit_words(rc or 0)}; see {log_path}"
        )
        if any(o.kind == "missing" for o in culprits):
            named += f" (see {log_path})"
        message = f"probe run failed: {named}"
    else:
        message = f"finished in {seconds:.1f} s"
    done = [p for p in spec.probes if len(_results(spec.out, p)) >= spec.world_size]
    result = LaunchResult(
        exit_code=128 + ended.signum if ended.signum is not None else (3 if failed else 0),
        failed=failed,
        seconds=round(seconds, 3),
        torchrun_exit_code=rc,
        deadline_hit=deadline_hit,
        ranks=outcomes,
        culprits=culprits,
        message=message,
        teardown_crash_ignored=teardown_crash,
        probes_done=done,
        interrupted=interrupted,
    )
    write_summary(spec, result, cmd, log_path)
    return result


def write_summary(spec: LaunchSpec, result: LaunchResult, cmd: list[str], log: Path) -> Path:
    name = "run.json" if spec.nnodes == 1 else f"run-{socket.gethostname()}-{os.getpid()}.json"
    path = spec.out / name
    data = {
        "format": 1,
        "command": cmd,
        "probes": spec.probes,
        "probes_done": result.probes_done,
        "nproc_per_node": spec.nproc,
        "nnodes": spec.nnodes,
        "world_size": spec.world_size,
        "backend": spec.backend,
        "deadline_s": spec.deadline_s,
        "collective_timeout_s": spec.collective_timeout_s,
        "seconds": result.seconds,
        "exit_code": result.exit_code,
        "torchrun_exit_code": result.torchrun_exit_code,
        "failed": result.failed,
        "deadline_hit": result.deadline_hit,
        "teardown_crash_ignored": result.teardown_crash_ignored,
        "interrupted": result.interrupted,
        "message": result.message,
        "ranks": [asdict(o) for o in result.ranks],
        "failed_ranks": [asdict(o) for o in result.culprits],
        "log": log.name,
    }
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path

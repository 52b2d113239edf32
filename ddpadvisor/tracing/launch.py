"""Run a training script under ``python -m torch.distributed.run`` with the trace agent.

The launcher owns the process group of the run: it streams the job's output (to the terminal
and to ``torchrun.log``), watches the per-rank progress files the agent keeps up to date, and
ends the run on a time limit or when no rank has made progress for ``stall`` seconds. Before
killing a stalled job it asks every rank for its Python stacks (SIGUSR1, which the agent routes
to ``faulthandler``) so the reader can tell the rank that hung from the ranks waiting for it.
No process outlives :func:`run_traced`.

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
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO

from ddpadvisor.tracing import ENV_DIR, ENV_EVERY, ENV_MAX_STEPS, agent_dir

# Files the agent and the launcher write; anything else in the folder is left alone.
TRACE_FILE = re.compile(
    r"^(rank\d+\.(jsonl|progress|stack|progress\.tmp)|meta\.json|torchrun\.log)$"
)


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

    def to_json(self) -> dict[str, object]:
        return asdict(self)


def prepare_dir(out: Path) -> None:
    """Create the output folder and remove a previous trace's files from it."""
    out.mkdir(parents=True, exist_ok=True)
    for path in out.iterdir():
        if path.is_file() and TRACE_FILE.match(path.name):
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
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    cmd += ["--nproc_per_node", str(nproc)]
    if target and target[0] == "-m":
        cmd += ["-m", *target[1:]]
    else:
        cmd += target
    return cmd


def _progress(out: Path) -> dict[int, dict[str, object]]:
    found: dict[int, dict[str, object]] = {}
    for path in out.glob("rank*.progress"):
        try:
            data = json.loads(path.read_text())
            found[int(path.name[4:].split(".")[0])] = data
        except (OSError, ValueError):
            continue
    return found


def _counters(p: dict[str, object]) -> tuple[object, ...]:
    return (p.get("step"), p.get("fwd"), p.get("bwd"), p.get("buckets"), p.get("phase"))


def _started(p: dict[str, object]) -> bool:
    return any(int(str(p.get(k) or 0)) > 0 for k in ("fwd", "bwd", "step"))


def _pump(stream: IO[bytes], log: IO[bytes], echo: IO[bytes] | None) -> None:
    for line in iter(stream.readline, b""):
        log.write(line)
        log.flush()
        if echo is not None:
            with contextlib.suppress(OSError, ValueError):
                echo.write(line)
                echo.flush()


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """TERM, then KILL, the whole process group of the run."""
    for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            # torchrun may be gone while a worker still runs: make sure the group is empty
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            return
        except subprocess.TimeoutExpired:
            continue


def run_traced(
    target: list[str],
    out: Path,
    *,
    nproc: int = 2,
    every: int = 50,
    max_steps: int | None = None,
    timeout: float | None = None,
    stall: float | None = 300.0,
    echo: bool = True,
    env: dict[str, str] | None = None,
) -> RunResult:
    """Launch, watch and end the traced run; write ``meta.json``; never leave a process."""
    prepare_dir(out)
    command = torchrun_command(nproc, target)
    run_env = agent_env(out, every, max_steps, dict(os.environ if env is None else env))
    start = time.monotonic()
    log = open(out / "torchrun.log", "wb")  # noqa: SIM115
    try:
        proc = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=run_env,
            start_new_session=True,  # one process group: killing it kills every rank
        )
    except OSError as exc:
        log.close()
        result = RunResult("failed", None, 0.0, nproc, command, Failure("launch", [], str(exc)))
        write_meta(out, result)
        return result
    assert proc.stdout is not None
    sink = sys.stdout.buffer if echo else None
    pump = threading.Thread(target=_pump, args=(proc.stdout, log, sink), daemon=True)
    pump.start()
    stalled = False
    timed_out = False
    last_change = time.monotonic()
    last_seen: dict[int, tuple[object, ...]] = {}
    try:
        while proc.poll() is None:
            time.sleep(0.2)
            now = time.monotonic()
            if timeout and now - start > timeout:
                timed_out = True
                break
            progress = _progress(out)
            seen = {rank: _counters(p) for rank, p in progress.items()}
            # Loading a model or data can take minutes without a step: the stall clock runs
            # only once every rank has started training (done a forward).
            training = len(progress) >= nproc and all(_started(p) for p in progress.values())
            if seen != last_seen or not training:
                last_seen = seen
                last_change = now
            elif stall and now - last_change > stall:
                stalled = True
                break
        if stalled or timed_out:
            _dump_stacks(out)
            _kill_group(proc)
    except BaseException:
        _kill_group(proc)
        raise
    finally:
        proc.wait()
        pump.join(timeout=5)
        log.close()
        # A worker that ignored torchrun's shutdown must not survive us.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
    seconds = round(time.monotonic() - start, 3)
    result = classify(out, proc.returncode, seconds, nproc, command, stalled, timed_out, stall)
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
_ROOT = re.compile(r"Root Cause.*?rank\s*:\s*(\d+).*?exitcode\s*:\s*(-?\d+)", re.S)


def _rank_records(out: Path) -> dict[int, list[dict[str, object]]]:
    """Each rank's records of its last run (a file may hold earlier runs appended)."""
    found: dict[int, list[dict[str, object]]] = {}
    for path in out.glob("rank*.jsonl"):
        try:
            rank = int(path.name[4:].split(".")[0])
        except ValueError:
            continue
        records: list[dict[str, object]] = []
        with path.open(encoding="utf-8", errors="replace") as fh:
            for line in fh:
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                if isinstance(rec, dict):
                    if rec.get("k") == "start":
                        records = []
                    records.append(rec)
        found[rank] = records
    return found


def _finished(records: list[dict[str, object]]) -> bool:
    return any(r.get("k") in ("end", "destroy", "final") for r in records) and not any(
        r.get("k") == "exception" for r in records
    )


def classify(
    out: Path,
    returncode: int | None,
    seconds: float,
    nproc: int,
    command: list[str],
    stalled: bool,
    timed_out: bool,
    stall: float | None,
) -> RunResult:
    """Turn the exit status, the rank files and torchrun's report into a verdict."""
    records = _rank_records(out)
    progress = _progress(out)
    result = RunResult("ok", returncode, seconds, nproc, command)
    if stalled or timed_out:
        hung = _hung_ranks(out, progress)
        what = f"no progress for {stall:g} s" if stalled else "the time limit was reached"
        where = [f"rank {r} at {at}" for r in hung if (at := _stack_top(out, r))]
        result.status = "failed"
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
    root = _ROOT.search(text)
    exceptions = {
        rank: rec for rank, recs in records.items() for rec in recs if rec.get("k") == "exception"
    }
    finished = len(records) >= nproc and all(_finished(r) for r in records.values())
    if finished and not exceptions:
        # Every rank had finished its work: a crash in interpreter teardown (a known gloo
        # quirk when a DDP model outlives destroy_process_group) loses nothing.
        who = f"rank {root.group(1)}" if root else "a rank"
        result.warnings.append(
            f"{who} exited with code {root.group(2) if root else returncode} after "
            "finishing its work (teardown crash); the trace is complete"
        )
        return result
    result.status = "failed"
    # torchrun names the first rank that failed; without its report, the earliest exception.
    # Exceptions on the other ranks are usually peers losing their connection to it.
    if root:
        rank, code = int(root.group(1)), int(root.group(2))
    elif exceptions:
        rank = min(exceptions, key=lambda r: float(exceptions[r].get("wall") or 0.0))
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
        result.failure = Failure(
            "killed" if code < 0 else "crashed", [rank], f"rank {rank} {how} (after step {step})"
        )
    else:
        unfinished = [r for r in range(nproc) if not _finished(records.get(r, []))]
        result.failure = Failure(
            "crashed",
            unfinished,
            f"torchrun exited with code {returncode}; unfinished rank(s): "
            + (", ".join(map(str, unfinished)) or "?"),
        )
    return result


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
        return tuple(int(p.get(k) or 0) for k in ("step", "fwd", "bwd", "buckets"))

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

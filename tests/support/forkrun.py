"""Many small traced 2-rank jobs from one interpreter that imported torch once (tests only).

A real ``ddpadvisor trace`` launch of a tiny zoo script costs about 9 CPU-seconds, almost all of
it three fresh interpreters importing torch (torchrun and two ranks). The zoo has ~55 such
jobs, so CI would spend most of its time importing torch. This runner imports torch once, then
installs the trace agent right after it, as ``sitecustomize`` does in a real rank, then imports
what jobs load lazily (torch._dynamo) and the frameworks named in ``preload`` (transformers,
accelerate, ... : so they bind the patched torch exactly as in a real rank, where the agent is in
before any library imports). Every rank of every job is forked from that warm process: each
child gets torchrun's environment (RANK, WORLD_SIZE, MASTER_PORT, ...), its own output log,
fresh Python/NumPy random states (a fresh interpreter seeds those from the OS) and torch's generator as a fresh process
has it (its default seed is fixed; the server's imports may have drawn from it) and a fresh agent writing to the job's folder, and runs
the script as ``__main__``.

What it does not exercise is the launch itself (sitecustomize, the import hook, torchrun, the
supervisor): tests/test_trace_zoo.py keeps a few jobs on the real ``run_traced`` path and
checks that both paths measure the same facts on the same script.

Usage (the test side): :func:`run_many` starts ``python tests/support/forkrun.py`` with the
jobs as JSON on stdin and returns the runs' verdicts, classified by
:func:`ddpadvisor.tracing.launch.classify` as a real launch would be.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
POLL_S = 0.02
KILL_AFTER_FAILURE_S = 3.0
FRESH_TORCH_RNG: list[Any] = []  # set by the server right after `import torch`


@dataclass
class Job:
    name: str
    script: Path
    out: Path
    args: list[str] = field(default_factory=list)
    nproc: int = 2
    timeout: float = 300.0
    env: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "script": str(self.script),
            "out": str(self.out),
            "args": self.args,
            "nproc": self.nproc,
            "timeout": self.timeout,
            "env": self.env,
        }


def run_many(
    jobs: list[Job],
    workers: int = 2,
    preload: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Run ``jobs`` (``workers`` at a time); ``{name: RunResult}`` in the order given.

    ``preload``: modules the server imports once after the agent (a missing one is skipped);
    ``env``: the server's environment, which every job inherits (default: this process's)."""
    from ddpadvisor.tracing.launch import classify, prepare_dir, write_meta

    for job in jobs:
        prepare_dir(job.out)
    spec = {"workers": workers, "preload": list(preload), "jobs": [j.to_json() for j in jobs]}
    payload = json.dumps(spec)
    base = dict(os.environ if env is None else env)
    env = {k: v for k, v in base.items() if not k.startswith("DDPADVISOR_TRACE")}
    proc = subprocess.run(
        [sys.executable, str(Path(__file__))],
        input=payload,
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"forkrun server failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    ended = {d["name"]: d for d in map(json.loads, proc.stdout.splitlines())}
    results = {}
    for job in jobs:
        e = ended[job.name]
        cmd = ["forkrun", str(job.script), *job.args]
        result = classify(
            job.out,
            e["returncode"],
            e["seconds"],
            job.nproc,
            cmd,
            False,
            e["timed_out"],
            None,
        )
        write_meta(job.out, result)
        results[job.name] = result
    return results


# ------------------------------------------------------------------ the server (torch inside)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _rank_main(job: dict[str, Any], rank: int, port: int) -> None:
    """In the forked child: become rank ``rank`` of ``job`` and run its script; never return."""
    code = 1
    try:
        out = Path(job["out"])
        log = os.open(out / f"rank{rank}.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(log, 1)
        os.dup2(log, 2)
        nproc = int(job["nproc"])
        os.environ.update(job["env"])
        os.environ.update(
            {
                "RANK": str(rank),
                "LOCAL_RANK": str(rank),
                "GROUP_RANK": "0",
                "ROLE_RANK": str(rank),
                "WORLD_SIZE": str(nproc),
                "LOCAL_WORLD_SIZE": str(nproc),
                "ROLE_WORLD_SIZE": str(nproc),
                "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": str(port),
                "TORCHELASTIC_RUN_ID": "forkrun",
                "OMP_NUM_THREADS": "1",
                "DDPADVISOR_TRACE": str(out.resolve()),
            }
        )
        import random

        import torch

        random.seed()  # a fresh interpreter's state, not the parent's copy
        if "numpy" in sys.modules:
            sys.modules["numpy"].random.seed()
        torch.random.set_rng_state(FRESH_TORCH_RNG[0])
        torch.set_num_threads(1)  # torchrun sets OMP_NUM_THREADS=1 for several ranks
        script = str(Path(job["script"]).resolve())
        sys.argv = [script, *job["args"]]
        sys.path[0] = os.path.dirname(script)
        # A fresh agent for this rank: the server's (installed before the frameworks were
        # imported, so they bind the patched torch) belongs to the server's pid and writes nothing.
        from ddpadvisor_trace_agent import _int_env, core
        from ddpadvisor_trace_agent import runtime as rt

        every = _int_env(rt.ENV_EVERY, rt.DEFAULT_EVERY)
        rt.AGENT = core.Agent(out.resolve(), every, _int_env(rt.ENV_MAX_STEPS, 0) or None)
        import runpy

        try:
            runpy.run_path(script, run_name="__main__")
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:
            sys.excepthook(*sys.exc_info())  # the agent's hook records it, then prints it
            code = 1
        import atexit

        atexit._run_exitfuncs()
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _serve() -> None:
    spec = json.loads(sys.stdin.read())
    sys.path.insert(1, str(REPO / "ddpadvisor" / "tracing" / "agent"))  # as PYTHONPATH does
    # torch once for every job, then the agent as sitecustomize installs it (right after torch,
    # before anything else), then what every DDP job imports lazily on its first forward (DDP
    # asks torch._dynamo whether it is compiling: sympy and much of inductor, ~800 modules) and
    # the frameworks the jobs use.
    import tempfile

    import torch

    # A fresh process's torch generator state: the imports below may draw from it.
    FRESH_TORCH_RNG.append(torch.random.get_rng_state())
    os.environ["DDPADVISOR_TRACE"] = tempfile.mkdtemp(prefix="forkrun-server-")
    import ddpadvisor_trace_agent

    ddpadvisor_trace_agent.install()
    os.rmdir(os.environ.pop("DDPADVISOR_TRACE"))  # the server's agent never writes
    import torch._dynamo
    import torch.distributed
    import torch.nn.parallel
    import torch.utils.data

    del torch
    with contextlib.suppress(ImportError):
        import numpy.random  # noqa: F401
    for name in spec.get("preload", []):
        try:
            importlib.import_module(name)
        except ImportError as exc:
            print(f"forkrun: preload {name} skipped: {exc}", file=sys.stderr)

    pending = list(spec["jobs"])
    workers = int(spec["workers"])
    running: dict[str, dict[str, Any]] = {}  # name -> {pids, started, codes}
    owner: dict[int, str] = {}
    while pending or running:
        while pending and len(running) < workers:
            job = pending.pop(0)
            port = _free_port()
            pids = []
            for rank in range(int(job["nproc"])):
                pid = os.fork()
                if pid == 0:
                    _rank_main(job, rank, port)
                pids.append(pid)
                owner[pid] = job["name"]
            running[job["name"]] = {"job": job, "pids": pids, "t0": time.monotonic(), "codes": {}}
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            now = time.monotonic()
            for state in running.values():
                late = now - state["t0"] > state["job"]["timeout"]
                if late and not state.get("timed_out"):
                    state["timed_out"] = True
                if late or now > state.get("kill_at", now + 1):
                    for p in state["pids"]:
                        if p not in state["codes"]:
                            os.kill(p, 9)
            time.sleep(POLL_S)
            continue
        name = owner.pop(pid)
        state = running[name]
        state["codes"][pid] = os.waitstatus_to_exitcode(status)
        if state["codes"][pid] != 0 and "kill_at" not in state:
            # torchrun stops the other ranks when one fails; they would wait on it forever.
            state["kill_at"] = time.monotonic() + KILL_AFTER_FAILURE_S
        if len(state["codes"]) == len(state["pids"]):
            del running[name]
            codes = [state["codes"][p] for p in state["pids"]]
            _write_log(Path(state["job"]["out"]), len(codes))
            bad = [c for c in codes if c != 0]
            print(
                json.dumps(
                    {
                        "name": name,
                        "returncode": bad[0] if bad else 0,
                        "seconds": time.monotonic() - state["t0"],
                        "timed_out": bool(state.get("timed_out")),
                    }
                ),
                flush=True,
            )


def _write_log(out: Path, nproc: int) -> None:
    """One torchrun.log as the real launcher leaves it: every rank's output."""
    with open(out / "torchrun.log", "w") as log:
        for rank in range(nproc):
            path = out / f"rank{rank}.log"
            if path.exists():
                for line in path.read_text(errors="replace").splitlines():
                    log.write(f"[rank{rank}]:{line}\n")
                path.unlink()


if __name__ == "__main__":
    _serve()

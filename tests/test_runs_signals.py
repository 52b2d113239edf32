"""No process outlives a run: signals to ``ddpadvisor trace`` / ``probe`` and hangs, by pid.

Each case launches once; the module fixture runs the cases two at a time. The ranks of the
tiny jobs written here record their pids (torchrun is a rank's parent, the reaper torchrun's),
so the checks name the exact processes that must be gone within 5 s, with their start times
against pid reuse. Rank 1 ignores SIGTERM in every job.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow
pytest.importorskip("torch")

GONE_WITHIN_S = 5.0
STALL_S = "15"

# Workers without torch: they start fast and wait for ever; rank 1 ignores SIGTERM.
SLEEPER = """
import os, signal, sys, time
rank = int(os.environ["RANK"])
if rank == 1:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
with open(os.path.join(sys.argv[1], f"rank{rank}.pid.tmp"), "w") as fh:
    fh.write(f"{os.getpid()} {os.getppid()}")
os.replace(os.path.join(sys.argv[1], f"rank{rank}.pid.tmp"),
           os.path.join(sys.argv[1], f"rank{rank}.pid"))
time.sleep(3600)
"""

# A DDP job whose rank 1 hangs at WHERE: before init, before the first step, or at step 3.
# Before the first step, rank 0 first computes without a word for longer than the stall time:
# CPU use counts as life until every rank reports progress.
HANGER = """
import os, signal, sys, time
rank = int(os.environ["RANK"])
where, piddir = sys.argv[1], sys.argv[2]
if rank == 1:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
with open(os.path.join(piddir, f"rank{rank}.pid.tmp"), "w") as fh:
    fh.write(f"{os.getpid()} {os.getppid()}")
os.replace(os.path.join(piddir, f"rank{rank}.pid.tmp"), os.path.join(piddir, f"rank{rank}.pid"))
import torch
import torch.distributed as dist
from torch import nn
print("rank", rank, "imported torch", flush=True)
if where == "init" and rank == 1:
    time.sleep(3600)
if where == "first-step" and rank == 0:  # busy and silent for longer than --stall: no stall
    end = time.monotonic() + 18
    while time.monotonic() < end:
        sum(range(10000))
dist.init_process_group("gloo")
model = nn.parallel.DistributedDataParallel(nn.Linear(4, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
if where == "first-step" and rank == 1:
    time.sleep(3600)
for step in range(1, 100000):
    if where == "mid-run" and rank == 1 and step == 3:
        time.sleep(3600)
    opt.zero_grad()
    model(torch.randn(8, 4)).sum().backward()
    opt.step()
"""


def _start_time(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return None if fields[0] in ("Z", "X") else fields[19]


def _ppid(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def _wait_for(paths: list[Path], timeout: float = 240.0) -> None:
    end = time.monotonic() + timeout
    while not all(p.exists() for p in paths):
        assert time.monotonic() < end, f"the job never started: {paths}"
        time.sleep(0.1)


def _tree_from_pid_files(piddir: Path) -> dict[str, tuple[int, str | None]]:
    """rank0, rank1, torchrun and reaper: pid and start time."""
    tree: dict[str, tuple[int, str | None]] = {}
    for rank in (0, 1):
        pid, parent = map(int, (piddir / f"rank{rank}.pid").read_text().split())
        tree[f"rank{rank}"] = (pid, _start_time(pid))
        tree["torchrun"] = (parent, _start_time(parent))
    reaper = _ppid(tree["torchrun"][0])
    tree["reaper"] = (reaper, _start_time(reaper))
    return tree


def _survivors(tree: dict[str, tuple[int, str | None]], within: float) -> list[str]:
    """Names of the processes still alive ``within`` seconds from now."""
    start = time.monotonic()
    while True:
        alive = [
            f"{name} (pid {pid})"
            for name, (pid, started) in tree.items()
            if started is not None and _start_time(pid) == started
        ]
        if not alive or time.monotonic() > start + within:
            print(
                f"{len(tree)} processes, {len(alive)} left after {time.monotonic() - start:.2f} s"
            )
            return alive
        time.sleep(0.05)


def _ddpadvisor(args: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "ddpadvisor", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )


def _signal_case(root: Path, sig: int, kind: str) -> dict[str, Any]:
    """Start a run, wait for both ranks, send ``sig`` to ddpadvisor, see who survives."""
    case = root / f"{kind}-{sig}"
    piddir = case / "pids"
    piddir.mkdir(parents=True)
    out = case / "out"
    if kind == "trace":
        script = case / "sleeper.py"
        script.write_text(SLEEPER)
        proc = _ddpadvisor(
            ["trace", "--nproc", "2", "--quiet", "--out", str(out), "--", str(script), str(piddir)]
        )
        _wait_for([piddir / "rank0.pid", piddir / "rank1.pid"])
        tree = _tree_from_pid_files(piddir)
    else:
        proc = _ddpadvisor(
            ["probe", "env", "collective", "--backend", "gloo", "--out", str(out)],
            env={"DDPADVISOR_PROBE_FAULT": "hang:rank=1:probe=collective"},
        )
        statuses = [out / "status" / f"rank{r}.json" for r in (0, 1)]
        _wait_for(statuses + [out / "env" / f"rank{r}.json" for r in (0, 1)])
        ranks = [int(json.loads(p.read_text())["pid"]) for p in statuses]
        tree = {f"rank{r}": (pid, _start_time(pid)) for r, pid in enumerate(ranks)}
        torchrun = _ppid(ranks[0])
        tree["torchrun"] = (torchrun, _start_time(torchrun))
        tree["reaper"] = (_ppid(torchrun), _start_time(_ppid(torchrun)))
    os.kill(proc.pid, sig)
    survivors = _survivors(tree, GONE_WITHIN_S)
    _, err = proc.communicate(timeout=60)
    return {"tree": tree, "survivors": survivors, "rc": proc.returncode, "err": err, "out": out}


def _hang_case(root: Path, where: str) -> dict[str, Any]:
    case = root / f"hang-{where}"
    piddir = case / "pids"
    piddir.mkdir(parents=True)
    script = case / "hanger.py"
    script.write_text(HANGER)
    out = case / "out"
    started = time.monotonic()
    proc = _ddpadvisor(
        [
            "trace",
            "--nproc",
            "2",
            "--quiet",
            "--stall",
            STALL_S,
            "--out",
            str(out),
            "--",
            str(script),
            where,
            str(piddir),
        ]
    )
    _wait_for([piddir / "rank0.pid", piddir / "rank1.pid"])
    tree = _tree_from_pid_files(piddir)
    _, err = proc.communicate(timeout=600)
    survivors = _survivors(tree, GONE_WITHIN_S)  # counted from ddpadvisor's exit
    seconds = time.monotonic() - started
    return {
        "tree": tree,
        "survivors": survivors,
        "rc": proc.returncode,
        "err": err,
        "out": out,
        "seconds": seconds,
    }


SIGNAL_CASES = [
    ("trace", signal.SIGINT),
    ("trace", signal.SIGTERM),
    ("trace", signal.SIGHUP),
    ("trace", signal.SIGKILL),
    ("probe", signal.SIGTERM),
]
HANGS = ["init", "first-step", "mid-run"]


@pytest.fixture(scope="module")
def cases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    root = tmp_path_factory.mktemp("runs")
    jobs: dict[str, Any] = {
        f"{kind}-{sig.name}": (lambda k=kind, s=sig: _signal_case(root, s, k))
        for kind, sig in SIGNAL_CASES
    }
    jobs.update({f"hang-{w}": (lambda w=w: _hang_case(root, w)) for w in HANGS})
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {name: pool.submit(fn) for name, fn in jobs.items()}
        return {name: f.result() for name, f in futures.items()}


@pytest.mark.parametrize(("kind", "sig"), SIGNAL_CASES, ids=lambda v: getattr(v, "name", v))
def test_a_signal_to_ddpadvisor_leaves_no_process(
    cases: Any, kind: str, sig: signal.Signals
) -> None:
    case = cases[f"{kind}-{sig.name}"]
    assert set(case["tree"]) == {"rank0", "rank1", "torchrun", "reaper"}
    assert len({pid for pid, _ in case["tree"].values()}) == 4
    assert case["survivors"] == [], case["err"]
    if sig == signal.SIGKILL:
        assert case["rc"] == -signal.SIGKILL
        return
    assert case["rc"] == 128 + sig, case["err"]
    lines = case["err"].strip().splitlines()
    assert f"interrupted by {sig.name}" in lines[-2 if kind == "probe" else -1], case["err"]
    assert "Traceback" not in case["err"]
    record = case["out"] / ("run.json" if kind == "probe" else "meta.json")
    data = json.loads(record.read_text())
    if kind == "probe":
        assert data["interrupted"] == sig.name and data["failed"]
        # what the ranks wrote before the signal is kept
        assert json.loads((case["out"] / "env" / "rank0.json").read_text())["status"] == "ok"
    else:
        assert data["failure"]["kind"] == "interrupted" and data["status"] == "failed"


@pytest.mark.parametrize("where", HANGS)
def test_a_hang_is_detected_from_the_launch_and_leaves_no_process(cases: Any, where: str) -> None:
    case = cases[f"hang-{where}"]
    assert case["survivors"] == [], case["err"]
    assert case["rc"] == 3, case["err"]
    line = case["err"].strip().splitlines()[-1]
    assert line.startswith("ddpadvisor: run failed: no progress for 15 s"), case["err"]
    meta = json.loads((case["out"] / "meta.json").read_text())
    assert meta["failure"]["kind"] == "hung"
    if where == "init":
        assert "init_process_group" in line
        assert meta["failure"]["ranks"] == [0, 1]
    else:
        assert "rank(s) 1 stopped first" in line
        assert meta["failure"]["ranks"] == [1]
        assert (case["out"] / "rank0.jsonl").is_file()  # the evidence written so far is kept

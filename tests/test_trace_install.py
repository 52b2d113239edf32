"""The agent installs whatever the import order and launcher, and a trace without training fails.

Launches (run once, two at a time, in a module fixture): the ``torchrun`` console script
running ``-m late_torch_job`` (torch looked up with find_spec first, imported lazily by a
library, DataLoader workers started with spawn); ``accelerate launch``; and a job that ends
before its first optimizer step under ``ddpadvisor trace --verify``.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from ddpadvisor.errors import InputError
from ddpadvisor.evidence.trace import load_trace, read_trace
from ddpadvisor.tracing import ENV_DIR, agent_dir

HERE = Path(__file__).resolve().parent
JOBS = HERE / "zoo" / "install"
BIN = Path(sys.executable).parent


def _env(trace: Path | None, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DDPADVISOR_TRACE")}
    path = [str(JOBS), *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]]
    if trace is not None:
        path.insert(0, str(agent_dir()))
        env[ENV_DIR] = str(trace)
    env["PYTHONPATH"] = os.pathsep.join(path)
    env.update(extra)
    return env


def _run(cmd: list[str], env: dict[str, str], cwd: Path | None = None) -> Any:
    return subprocess.run(
        cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=300, check=False
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _steps(trace: Path) -> dict[int, int]:
    ranks, _meta, _warnings = load_trace(trace)
    return {t.rank: len(t.steps) for t in ranks}


@pytest.mark.slow  # a fresh interpreter imports torch
def test_find_spec_lookup_then_lazy_import_installs_the_agent(tmp_path):  # type: ignore[no-untyped-def]
    code = (
        "import importlib.util, late_torch_lib;"
        "assert importlib.util.find_spec('torch') is not None;"
        "t = late_torch_lib.torch();"
        "print(getattr(t, '_ddpadvisor_agent', False), type(t.Tensor.backward).__name__,"
        " getattr(t.Tensor.backward, '__ddpadvisor__', False))"
    )
    proc = _run([sys.executable, "-c", code], _env(tmp_path / "t"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["True", "function", "True"]
    assert not (tmp_path / "t").exists()  # nothing written outside a process group


@pytest.fixture(scope="module")
def launches(tmp_path_factory):  # type: ignore[no-untyped-def]
    root = tmp_path_factory.mktemp("install")
    workers = root / "workers"
    workers.mkdir()

    def torchrun_module() -> Any:
        cmd = [str(BIN / "torchrun"), "--standalone", "--nproc_per_node", "2"]
        cmd += ["-m", "late_torch_job"]
        return _run(cmd, _env(root / "torchrun", LATE_TORCH_OUT=str(workers)), cwd=root)

    def accelerate_launch() -> Any:
        cmd = [str(BIN / "accelerate"), "launch", "--multi_gpu", "--num_processes", "2"]
        cmd += ["--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no"]
        cmd += ["--main_process_port", str(_free_port())]  # not 29500: other jobs use it
        cmd += [str(JOBS / "accelerate_job.py")]
        return _run(cmd, _env(root / "accelerate"), cwd=root)

    def no_step() -> Any:
        cmd = [sys.executable, "-m", "ddpadvisor", "trace", "--nproc", "2", "--quiet"]
        cmd += ["--out", str(root / "no-step"), "--verify", "loss-scaled-by-world-size"]
        cmd += ["--", str(JOBS / "no_step_job.py")]
        return _run(cmd, _env(None))

    jobs = {"torchrun": torchrun_module, "no_step": no_step}
    if (BIN / "accelerate").is_file():
        jobs["accelerate"] = accelerate_launch
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {name: pool.submit(fn) for name, fn in jobs.items()}
        results = {name: f.result() for name, f in futures.items()}
    return {"root": root, "workers": workers, **results}


@pytest.mark.slow
def test_torchrun_console_script_with_dash_m_and_late_torch(launches):  # type: ignore[no-untyped-def]
    proc = launches["torchrun"]
    assert proc.returncode == 0, proc.stderr[-2000:]
    trace = launches["root"] / "torchrun"
    # 48 samples, 2 ranks, batches of 8: 3 optimizer steps per rank.
    assert _steps(trace) == {0: 3, 1: 3}
    assert sorted(p.name for p in trace.glob("rank?.jsonl")) == ["rank0.jsonl", "rank1.jsonl"]


@pytest.mark.slow
def test_spawned_dataloader_workers_load_the_agent_but_never_trace(launches):  # type: ignore[no-untyped-def]
    notes = [p.read_text() for p in launches["workers"].glob("worker*.txt")]
    assert len(notes) == 4  # 2 workers per rank
    assert set(notes) == {"True"}  # the agent is there, and still nothing but the ranks wrote
    trace = launches["root"] / "torchrun"
    for path in trace.glob("rank?.jsonl"):
        starts = [line for line in path.read_text().splitlines() if '"k":"start"' in line]
        assert len(starts) == 1
    # ... but the probe around worker_init_fn (pickled into the spawned workers): each rank's
    # workers appended their fetches' generator digests, and nothing else
    for rank in (0, 1):
        lines = (trace / f"rank{rank}.workers.jsonl").read_text().splitlines()
        kinds = {json.loads(line)["k"] for line in lines}
        workers = {json.loads(line)["w"] for line in lines}
        assert kinds == {"wfetch"} and workers == {0, 1}


@pytest.mark.slow
def test_accelerate_launch_is_traced(launches):  # type: ignore[no-untyped-def]
    if "accelerate" not in launches:
        pytest.skip("accelerate is not installed (pip install accelerate)")
    proc = launches["accelerate"]
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert _steps(launches["root"] / "accelerate") == {0: 3, 1: 3}


@pytest.mark.slow
def test_trace_without_optimizer_step_is_a_failed_run_and_cannot_verify(launches):  # type: ignore[no-untyped-def]
    proc = launches["no_step"]
    assert proc.returncode == 3, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith(("verify", "ddpadv"))]
    assert any("cannot verify loss-scaled-by-world-size" in line for line in lines)
    failed = [line for line in lines if line.startswith("ddpadvisor: run failed")]
    assert len(failed) == 1
    assert "no rank recorded an optimizer step" in failed[0]


def _write_trace(folder: Path, world: int, steps: int) -> None:
    folder.mkdir()
    for rank in range(world):
        recs = [{"k": "start", "v": 1, "rank": rank, "world": world, "backend": "gloo"}]
        recs += [{"k": "step", "s": s, "loss": [1.0], "lr": [0.1]} for s in range(1, steps + 1)]
        (folder / f"rank{rank}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))


def test_verify_without_the_facts_a_cause_acts_on_cannot_pass(tmp_path, engine):  # type: ignore[no-untyped-def]
    from ddpadvisor.tracing.cli import _verify

    folder = tmp_path / "bare"
    _write_trace(folder, world=2, steps=3)
    measured = {o.fact for o in read_trace(engine.kb, folder).observations}
    kb = engine.kb
    blind = []
    for cause in kb.causes.values():
        facts = {link.fact for link in cause.evidence}
        for via in cause.via:
            facts |= {link.fact for link in kb.mechanisms[via.mechanism].evidence}
        if not facts & measured:
            blind.append(cause.id)
    assert blind, "a bare trace should leave some cause without evidence"
    with pytest.raises(InputError, match="cannot verify"):
        _verify(engine, folder, blind[0])


@pytest.mark.slow  # a fresh interpreter imports torch
def test_each_patch_can_be_switched_off_and_uninstalled(tmp_path):  # type: ignore[no-untyped-def]
    code = (
        "import torch, ddpadvisor_trace_agent as agent;"
        "from ddpadvisor_trace_agent.hooks import PATCHES;"
        "wrapped = lambda f: getattr(f, '__ddpadvisor__', False);"
        "print(sorted(PATCHES) == sorted(set(PATCHES)), wrapped(torch.Tensor.backward),"
        " wrapped(torch.optim.Optimizer.zero_grad));"
        "agent.uninstall();"
        "print(wrapped(torch.optim.Optimizer.zero_grad), wrapped(torch.nn.Module.zero_grad),"
        " len(__import__('sys').modules['torch.optim.optimizer']._global_optimizer_post_hooks))"
    )
    proc = _run([sys.executable, "-c", code], _env(tmp_path / "t", DDPADVISOR_TRACE_OFF="autograd"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["True", "False", "True", "False", "False", "0"]

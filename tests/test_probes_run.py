"""Probes under real torchrun launches (2 gloo ranks on this CPU machine).

One session fixture runs the whole suite through ``ddpadvisor probe`` and several tests read
it. Each fault test launches once. The stand-alone tests copy a single probe file into an
empty folder and run it with plain torchrun, with ``ddpadvisor`` made unimportable.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from ddpadvisor.evidence.probe_results import read_probe_results
from tests.conftest import REPO

pytestmark = pytest.mark.slow
pytest.importorskip("torch")

PROBES_DIR = REPO / "probes"
ALL = ["env", "collective", "seeds", "sampler", "checksums", "scaler"]
# Generous: other test sessions may share these two cores. The deadline is only a backstop;
# the fault tests rely on the collective timeout.
DEADLINE = "240"

FAULTY_MODEL = '''
import torch
from torch import nn


def build():
    model = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 1))

    def make_batch(step, rank):
        return torch.randn(6, 8, generator=torch.Generator().manual_seed(10 * step + rank))

    return model, make_batch


def add_adapter(ddp):
    """Inject a module after wrapping, initialised differently on every rank."""
    import torch.distributed as dist

    torch.manual_seed(100 + dist.get_rank())
    inner = ddp.module
    inner.adapter = nn.Linear(1, 1)
    forward = inner.forward
    inner.forward = lambda x: inner.adapter(forward(x))
'''

SEEDING = """
import random

import torch


def seed_everything(rank):
    random.seed(1234 + rank)  # augmentation stream per rank
    torch.manual_seed(1234)  # model init shared
"""


def _ddpadvisor(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None):  # type: ignore[no-untyped-def]
    return subprocess.run(
        [sys.executable, "-m", "ddpadvisor", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        cwd=cwd,
        timeout=600,
    )


def _processes_mentioning(text: str) -> list[str]:
    """Command lines of live processes that mention text (the run's unique folder)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if text in cmdline and state != "Z":
            found.append(f"{entry.name}: {cmdline}")
    return found


def _blocker(tmp: Path) -> dict[str, str]:
    """Environment in which importing ddpadvisor fails, to prove a probe does not need it."""
    package = tmp / "blocker" / "ddpadvisor"
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text("raise ImportError('probes must not import ddpadvisor')\n")
    return {"PYTHONPATH": str(tmp / "blocker"), "OMP_NUM_THREADS": "1"}


def _standalone(
    probe: str, tmp: Path, args: list[str], nproc: int = 2, env: dict[str, str] | None = None
) -> Path:
    """Copy one probe file alone into a folder and run it with plain torchrun."""
    alone = tmp / f"{probe}-alone"
    alone.mkdir()
    shutil.copy(PROBES_DIR / f"{probe}.py", alone / f"{probe}.py")
    shutil.copy(PROBES_DIR / "_harness.py", alone / "_harness.py")
    out = tmp / f"{probe}-out"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc_per_node",
            str(nproc),
            str(alone / f"{probe}.py"),
            "--out",
            str(out),
            "--timeout",
            "60",
            *args,
        ],
        capture_output=True,
        text=True,
        cwd=tmp,
        env={**os.environ, **_blocker(tmp), **(env or {})},
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out


def _facts(engine: Any, folder: Path) -> tuple[dict[str, Any], Any]:
    got = read_probe_results(engine.kb, folder)
    return {o.fact: o for o in got.observations}, got


def _run_json(folder: Path) -> dict[str, Any]:
    return json.loads((folder / "run.json").read_text())


# ---------------------------------------------------------------- the whole suite, once


@pytest.fixture(scope="session")
def suite(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, subprocess.CompletedProcess[str]]:
    out = tmp_path_factory.mktemp("suite") / "results"
    proc = _ddpadvisor(
        "probe", "--nproc", "2", "--backend", "gloo", "--timeout", DEADLINE, "--out", str(out)
    )
    return out, proc


def test_full_suite_runs_every_probe_on_every_rank(suite: Any) -> None:
    out, proc = suite
    assert proc.returncode == 0, proc.stderr
    for name in ALL:
        assert name in proc.stderr  # one progress line per probe
        for rank in (0, 1):
            record = json.loads((out / name / f"rank{rank}.json").read_text())
            assert record["status"] == "ok", record.get("traceback")
            assert record["rank"] == rank and record["world_size"] == 2
            assert record["backend"] == "gloo"
    run = _run_json(out)
    assert run["failed"] is False and run["probes_done"] == ALL
    assert [r["kind"] for r in run["ranks"]] == ["ok", "ok"]
    assert _processes_mentioning(str(out)) == []


def test_full_suite_finds_nothing_wrong_here(suite: Any) -> None:
    out, _ = suite

    def result(probe: str) -> dict[str, Any]:
        return json.loads((out / probe / "rank0.json").read_text())["result"]

    assert result("collective")["ok"] and result("collective")["cases"] == 60
    assert result("checksums")["params_match"] and result("checksums")["grads_match"]
    assert result("checksums")["params_not_in_reducer"] == []
    scaler = result("scaler")
    assert scaler["scaler_state_match"] and scaler["skipped_steps"] == [scaler["inf_step"]]
    sampler = result("sampler")
    assert not sampler["shards_overlap"] and sampler["coverage"] == 1.0
    assert sampler["without_set_epoch"]["order_repeats"]
    assert not sampler["with_set_epoch"]["order_repeats"]
    env = result("env")
    assert env["world_size"] == 2 and env["gpu"] is None and env["consistent"]


def test_json_diagnosis_shows_the_measured_facts(suite: Any) -> None:
    import torch

    out, _ = suite
    proc = _ddpadvisor("--json", "--probe-results", str(out))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    facts = {f["fact"]: f for f in doc["facts"]}
    assert {f["source"] for f in facts.values()} == {"probe"}
    assert facts["allreduce_correct"]["value"] is True
    assert facts["torch_version"]["value"] == torch.__version__
    assert facts["world_size"]["value"] == 2
    assert facts["nccl_env_overrides"]["value"] is False
    assert "gpu_supports_bf16" not in facts  # no GPU here: not measured
    # The built-in stand-ins passed: that is not evidence about a training script.
    assert "param_checksums_match" not in facts
    assert any("--model" in w for w in doc["warnings"])


# ---------------------------------------------------------------- injected faults


def test_corrupted_allreduce_is_reported_with_its_rank(engine: Any, tmp_path: Path) -> None:
    out = _standalone(
        "collective",
        tmp_path,
        ["--sizes", "1,1023"],
        env={"DDPADVISOR_PROBE_FAULT": "corrupt_allreduce:rank=1"},
    )
    facts, got = _facts(engine, out)
    fact = facts["allreduce_correct"]
    assert fact.value is False and fact.where == "probe collective rank 1"
    assert "rank 1" in fact.detail and "all_reduce" in fact.detail and "rank 0" not in fact.detail
    assert not got.failed  # the probe ran; it found a fault


def test_parameter_created_per_rank_after_wrap_is_named(engine: Any, tmp_path: Path) -> None:
    (tmp_path / "faulty_model.py").write_text(FAULTY_MODEL)
    out = _standalone(
        "checksums",
        tmp_path,
        ["--model", "faulty_model:build", "--after-wrap", "faulty_model:add_adapter"],
    )
    facts, _ = _facts(engine, out)
    assert facts["param_checksums_match"].value is False
    assert facts["param_checksums_match"].where == "probe checksums rank 1"
    assert "adapter.weight" in facts["param_checksums_match"].detail
    assert facts["params_not_in_reducer"].value == 2
    assert facts["grads_match_after_sync"].value is False
    assert facts["buffer_checksums_match"].value is True  # BatchNorm stats are broadcast
    assert facts["has_batchnorm"].value is True


@pytest.mark.parametrize(("fault", "kind"), [("hang", "hung"), ("crash", "crashed")])
def test_a_hung_or_crashed_rank_ends_the_run_and_is_named(
    fault: str, kind: str, tmp_path: Path
) -> None:
    out = tmp_path / "results"
    started = time.monotonic()
    proc = _ddpadvisor(
        "probe",
        "env",
        "collective",
        "--timeout",
        DEADLINE,
        "--collective-timeout",
        "5",
        "--out",
        str(out),
        env={"DDPADVISOR_PROBE_FAULT": f"{fault}:rank=1:probe=collective"},
    )
    assert proc.returncode == 3, proc.stderr
    assert time.monotonic() - started < float(DEADLINE)
    assert "rank 1" in proc.stderr.splitlines()[-2] and "Traceback" not in proc.stderr
    run = _run_json(out)
    assert [(r["rank"], r["kind"], r["probe"]) for r in run["failed_ranks"]] == [
        (1, kind, "collective")
    ]
    assert _processes_mentioning(str(out)) == []
    # What finished before the fault is kept and still readable.
    assert json.loads((out / "env" / "rank0.json").read_text())["status"] == "ok"


def test_the_deadline_kills_every_process(engine: Any, tmp_path: Path) -> None:
    out = tmp_path / "results"
    started = time.monotonic()
    proc = _ddpadvisor(
        "probe",
        "collective",
        "--timeout",
        "10",
        "--collective-timeout",
        "600",
        "--out",
        str(out),
        env={"DDPADVISOR_PROBE_FAULT": "hang:rank=1"},
    )
    elapsed = time.monotonic() - started
    assert proc.returncode == 3
    assert elapsed < 10 + 30  # the deadline plus the kill grace and process start-up
    run = _run_json(out)
    assert run["deadline_hit"] and sorted(r["rank"] for r in run["failed_ranks"]) == [0, 1]
    assert _processes_mentioning(str(out)) == []
    _, got = _facts(engine, out)
    assert got.failed


# ---------------------------------------------------------------- topology and stand-alone


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_two_torchrun_nodes_on_one_machine(engine: Any, tmp_path: Path) -> None:
    """Multi-node path: two torchrun agents meet through c10d rendezvous on 127.0.0.1."""
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy(PROBES_DIR / "seeds.py", alone / "seeds.py")
    shutil.copy(PROBES_DIR / "_harness.py", alone / "_harness.py")
    (tmp_path / "seeding.py").write_text(SEEDING)
    out = tmp_path / "results"
    port = _free_port()
    env = {**os.environ, **_blocker(tmp_path)}
    nodes = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "torch.distributed.run",
                "--nnodes",
                "2",
                "--nproc_per_node",
                "1",
                "--rdzv_backend",
                "c10d",
                "--rdzv_endpoint",
                f"127.0.0.1:{port}",
                "--rdzv_id",
                f"probe-test-{port}",
                str(alone / "seeds.py"),
                "--out",
                str(out),
                "--setup",
                "seeding:seed_everything",
            ],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for _ in range(2)
    ]
    logs = [node.communicate(timeout=600)[0] for node in nodes]
    assert [node.returncode for node in nodes] == [0, 0], "\n".join(logs)[-4000:]
    records = [json.loads((out / "seeds" / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert [r["world_size"] for r in records] == [2, 2]
    result = records[0]["result"]
    assert result["identical"]["torch"] and not result["identical"]["python"]
    facts, _ = _facts(engine, out)
    fact = facts["rank_seeds_identical"]
    assert fact.value is False and "python" in fact.detail and fact.where == "probe seeds rank 1"


def test_env_sampler_and_scaler_run_alone(engine: Any, tmp_path: Path) -> None:
    env_out = _standalone("env", tmp_path, [], nproc=1, env={"NCCL_ALGO": "Tree"})
    sampler_out = _standalone(
        "sampler", tmp_path, ["--seed-per-rank", "--calls-set-epoch", "no", "--dataset-size", "50"]
    )
    scaler_out = _standalone("scaler", tmp_path, [], nproc=1)
    facts, _ = _facts(engine, env_out)
    assert facts["nccl_algo"].value == "NCCL_ALGO=Tree"
    assert facts["nccl_env_overrides"].value is True
    facts, _ = _facts(engine, sampler_out)
    assert facts["sampler_shards_overlap"].value is True
    assert facts["sampler_order_repeats_across_epochs"].value is True
    scaler = json.loads((scaler_out / "scaler" / "rank0.json").read_text())["result"]
    assert scaler["scaler_state_match"] and scaler["skipped_steps"] == [scaler["inf_step"]]

"""The trace agent on real 2-rank gloo runs: numerics untouched, failures named, CLI contract.

All launches of this module run once, two at a time, in a module fixture.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from ddpadvisor.evidence.trace import read_trace
from ddpadvisor.tracing.launch import RunResult, agent_env, run_traced, torchrun_command

ZOO = Path(__file__).resolve().parent / "zoo"
FAILURES = ZOO / "failures"

pytestmark = pytest.mark.slow


def _plain_run(script: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        torchrun_command(2, [str(script)]),
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    root = tmp_path_factory.mktemp("agent")
    plain_out = root / "numerics-plain"
    traced_out = root / "numerics-traced"
    for d in (plain_out, traced_out):
        d.mkdir()
    base = {k: v for k, v in os.environ.items() if not k.startswith("DDPADVISOR_TRACE")}

    def numerics_plain() -> Any:
        return _plain_run(ZOO / "numerics_check.py", dict(base, NUMERICS_OUT=str(plain_out)))

    def numerics_traced() -> RunResult:
        env = dict(base, NUMERICS_OUT=str(traced_out))
        return run_traced(
            [str(ZOO / "numerics_check.py")], root / "trace-numerics", every=1, echo=False, env=env
        )

    def failure(name: str, **kw: Any) -> RunResult:
        return run_traced([str(FAILURES / f"{name}.py")], root / name, echo=False, env=base, **kw)

    def own_torchrun() -> Any:
        # The user's own launcher: only the two environment variables (plus a step limit).
        env = agent_env(root / "own", every=50, max_steps=3, base=base)
        return _plain_run(ZOO / "control_mlp.py", env)

    jobs = {
        "plain": numerics_plain,
        "traced": numerics_traced,
        "crash": lambda: failure("crash"),
        "crash_before_init": lambda: failure("crash_before_init"),
        "killed": lambda: failure("killed"),
        # The stall clock runs from launch: the first DDP wrap imports torch._dynamo (and
        # sympy), which under a loaded machine took over 10 s and read as both ranks hung.
        "hang": lambda: failure("hang", stall=30.0),
        "own": own_torchrun,
    }
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {name: pool.submit(fn) for name, fn in jobs.items()}
        results = {name: f.result() for name, f in futures.items()}
    results["root"] = root
    results["plain_out"] = plain_out
    results["traced_out"] = traced_out
    return results


def test_agent_leaves_numerics_bit_for_bit_unchanged(runs):  # type: ignore[no-untyped-def]
    torch = pytest.importorskip("torch")
    assert runs["plain"].returncode == 0, runs["plain"].stderr[-2000:]
    assert runs["traced"].status == "ok", runs["traced"].failure
    for rank in (0, 1):
        a = torch.load(runs["plain_out"] / f"rank{rank}.pt", weights_only=False)
        b = torch.load(runs["traced_out"] / f"rank{rank}.pt", weights_only=False)
        for key, value in a["model"].items():
            assert torch.equal(value, b["model"][key]), f"rank {rank}: {key} differs"
        for pid, st in a["optim"]["state"].items():
            for k, v in st.items():
                assert torch.equal(v, b["optim"]["state"][pid][k]), f"rank {rank}: optim {pid}.{k}"
        assert a["scaler"] == b["scaler"]
        assert torch.equal(a["rng"], b["rng"]), "the agent consumed random numbers"


def test_traced_numerics_run_checked_every_step(runs, engine):  # type: ignore[no-untyped-def]
    got = read_trace(engine.kb, runs["root"] / "trace-numerics")
    facts = {o.fact: o.value for o in got.observations}
    assert facts["param_checksums_match"] is True
    assert facts["buffer_checksums_match"] is True
    assert facts["grad_accum_steps"] == 2
    assert facts["final_micro_step_synced"] is True
    assert facts["precision"] == "fp16_amp"
    assert facts["unscale_before_clip"] is True
    assert facts["scaler_state_match"] is True
    assert not got.failed


@pytest.mark.parametrize(
    ("name", "kind", "text"),
    [
        ("crash", "crashed", "rank 1 raised RuntimeError"),
        ("killed", "killed", "rank 1 was killed by signal 9"),
        ("hang", "hung", "rank(s) 1 stopped first"),
    ],
)
def test_failed_rank_is_named_and_partial_trace_diagnoses(runs, engine, name, kind, text):  # type: ignore[no-untyped-def]
    result: RunResult = runs[name]
    assert result.status == "failed"
    assert result.failure is not None
    assert result.failure.kind == kind
    assert result.failure.ranks == [1]
    assert text in result.failure.message
    folder = runs["root"] / name
    meta = json.loads((folder / "meta.json").read_text())
    assert meta["failure"]["ranks"] == [1]
    got = read_trace(engine.kb, folder)
    assert got.failed
    facts = {o.fact: o.value for o in got.observations}
    assert facts["world_size"] == 2
    assert facts["param_checksums_match"] is True  # steps 1, 2 and 4 were checked before the fault


def test_json_diagnosis_of_a_failed_trace_exits_3_with_a_document(runs):  # type: ignore[no-untyped-def]
    proc = subprocess.run(
        [sys.executable, "-m", "ddpadvisor", "--json", "--trace", str(runs["root"] / "crash")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 3, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["run_failed"] is True
    assert any("rank 1 raised RuntimeError" in w for w in doc["warnings"])
    assert any(f["source"] == "trace" for f in doc["facts"])


def test_a_rank_failing_before_any_record_is_named_with_its_exception(runs):  # type: ignore[no-untyped-def]
    result: RunResult = runs["crash_before_init"]
    assert result.status == "failed" and result.failure is not None
    # no rank wrote a record: the failure still says what was raised, and where in the script
    assert "RuntimeError: Distributed package doesn't have NCCL built in" in result.failure.message
    assert "at crash_before_init.py:8" in result.failure.message
    folder = runs["root"] / "crash_before_init"
    proc = subprocess.run(
        [sys.executable, "-m", "ddpadvisor", "--json", "--trace", str(folder)],
        capture_output=True,
        text=True,
        check=False,
        cwd=runs["root"],  # not the job's folder: the script is found through meta.json
    )
    assert proc.returncode == 3, proc.stderr
    doc = json.loads(proc.stdout)
    # no rank recorded a fact: nothing looks healthy, and the run's failure is said up front
    assert doc["run_failed"] is True and doc["verdict"] == "undecided"
    warnings = doc["warnings"]
    assert any("NCCL built in" in w for w in warnings), warnings
    # the launcher's command line stands in for the missing start records: the script is scanned
    assert not any("does not record the job's command line" in w for w in warnings), warnings
    assert any("crash_before_init.py" in w and "scanned" in w for w in warnings), warnings


def test_agent_under_the_users_own_torchrun(runs):  # type: ignore[no-untyped-def]
    proc = runs["own"]
    assert proc.returncode == 0, proc.stderr[-2000:]
    folder = runs["root"] / "own"
    for rank in (0, 1):
        records = [
            json.loads(line) for line in (folder / f"rank{rank}.jsonl").read_text().splitlines()
        ]
        steps = [r["s"] for r in records if r["k"] == "step"]
        assert steps == [1, 2, 3]
        assert records[-1]["k"] == "end" and records[-1]["why"] == "max_steps"
    assert not (folder / "meta.json").exists()


def _cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ddpadvisor", "trace", *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=cwd,
    )


def test_cli_bad_input_is_one_line_exit_2(tmp_path):  # type: ignore[no-untyped-def]
    for args, needle in (
        (("--", str(tmp_path / "missing.py")), "no such training script"),
        (("--every", "0", "--", "x.py"), "--every: must be at least 1"),
        ((), "nothing to run"),
    ):
        proc = _cli(*args)
        assert proc.returncode == 2, (args, proc.stderr)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and needle in lines[0], proc.stderr
        assert "Traceback" not in proc.stderr


def test_print_env_enables_the_agent(tmp_path):  # type: ignore[no-untyped-def]
    proc = _cli("--print-env", "--out", str(tmp_path / "t"), "--every", "7")
    assert proc.returncode == 0
    text = proc.stdout
    assert "DDPADVISOR_TRACE=" in text and "DDPADVISOR_TRACE_EVERY=7" in text
    assert "tracing/agent" in text

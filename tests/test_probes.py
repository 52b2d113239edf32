"""Probes without torchrun: self-containment, the importable checks, failure analysis,
reading results, and the ``probe`` command's argument errors."""

from __future__ import annotations

import ast
import importlib.util
import json
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from ddpadvisor.cli import main as cli_main
from ddpadvisor.errors import InputError
from ddpadvisor.evidence.probe_results import read_probe_results
from ddpadvisor.probing.launch import LaunchSpec, classify, launch, pick_culprits, torchrun_command
from ddpadvisor.runs import command
from tests.conftest import REPO

PROBES_DIR = REPO / "probes"
PROBE_FILES = ["env", "collective", "seeds", "sampler", "checksums", "scaler"]


def load_probe(name: str) -> ModuleType:
    """Load a probe file by path, as the trace instrumentation does."""
    key = f"test_probe_{name}"
    if key not in sys.modules:
        spec = importlib.util.spec_from_file_location(key, PROBES_DIR / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[key] = module
        spec.loader.exec_module(module)
    return sys.modules[key]


# ---------------------------------------------------------------- self-containment


def test_probes_share_one_harness_beside_them() -> None:
    """No probe carries its own copy of the harness; each imports _harness.py from its folder."""
    harness_defs = {"probe_main", "init_distributed", "write_json", "set_status", "fault_for"}
    for name in [*PROBE_FILES, "run_all"]:
        tree = ast.parse((PROBES_DIR / f"{name}.py").read_text())
        defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        assert not defined & harness_defs, f"{name}.py defines {defined & harness_defs}"
        imported = {a.name for n in tree.body if isinstance(n, ast.Import) for a in n.names}
        assert "_harness" in imported, f"{name}.py does not import _harness"


def test_run_all_takes_its_probes_from_the_catalog() -> None:
    from ddpadvisor.bundled import probe_catalog

    catalog = json.loads((PROBES_DIR / "catalog.json").read_text())
    names = [entry["name"] for entry in catalog["probes"]]
    assert load_probe("_harness").catalog() == names == list(probe_catalog())
    assert sorted(names) == sorted(
        p.stem for p in PROBES_DIR.glob("*.py") if p.stem[0] != "_" and p.stem != "run_all"
    )
    for path in PROBES_DIR.glob("*.py"):  # no other list of probe names in probes/
        text = path.read_text()
        assert not re.search(r"\(\s*\"env\",\s*\"collective\"", text), path.name


@pytest.mark.parametrize("name", [*PROBE_FILES, "run_all", "_harness"])
def test_probe_files_import_only_stdlib_and_torch(name: str) -> None:
    tree = ast.parse((PROBES_DIR / f"{name}.py").read_text())
    allowed = set(sys.stdlib_module_names) | {"torch", "__future__", "_harness"}
    if name == "seeds":
        allowed.add("numpy")  # optional there, guarded (the test below)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots = [alias.name.split(".")[0] for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots = [node.module.split(".")[0]]
        else:
            continue
        assert set(roots) <= allowed, f"{name}.py imports {roots}"
    # torch calls that go through numpy (the *_object collectives unpickle with .numpy()).
    needs_numpy = {"numpy", "from_numpy", "all_gather_object", "broadcast_object_list"}
    needs_numpy |= {"gather_object", "scatter_object_list", "all_to_all_object"}
    used = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)} & needs_numpy
    if name == "seeds":
        used -= {"numpy"}  # np.random.get_state, guarded
    assert not used, f"{name}.py calls {used}"


def test_numpy_is_optional_in_seeds() -> None:
    """numpy is not part of the contract: its import must sit inside try/except ImportError."""
    tree = ast.parse((PROBES_DIR / "seeds.py").read_text())
    guarded = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.Try)
        and any(isinstance(h.type, ast.Name) and h.type.id == "ImportError" for h in node.handlers)
        for inner in ast.walk(node)
    }
    numpy_imports = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Import) and any(a.name == "numpy" for a in n.names)
    ]
    assert numpy_imports and all(id(n) in guarded for n in numpy_imports)


# ---------------------------------------------------------------- importable checks


def test_fingerprint_is_float64_sum_and_sum_of_squares() -> None:
    torch = pytest.importorskip("torch")
    checksums = load_probe("checksums")
    fp = checksums.fingerprint([torch.tensor([1.0, 2.0]), torch.tensor([[3]], dtype=torch.int8)])
    assert fp.dtype == torch.float64
    assert fp.tolist() == [[3.0, 5.0], [3.0, 9.0]]
    assert checksums.fingerprint([]).shape == (0, 2)


def test_compare_fingerprints_names_tensor_and_ranks() -> None:
    torch = pytest.importorskip("torch")
    checksums = load_probe("checksums")
    same = torch.tensor([[1.0, 1.0], [float("nan"), 2.0]])
    odd = torch.tensor([[1.0, 1.0], [float("nan"), 2.5]])
    names = ["a.weight", "b.bias"]
    assert checksums.compare_fingerprints([same, same.clone()], names) == []
    diffs = checksums.compare_fingerprints([same, same.clone(), odd], names)
    assert [d["name"] for d in diffs] == ["b.bias"]
    assert diffs[0]["ranks"] == [2] and diffs[0]["odd_ranks"] == [2]
    assert diffs[0]["values"][2][1] == 2.5
    # When rank 0 is the odd one, ranks lists who differs from it, odd_ranks who is odd.
    diffs = checksums.compare_fingerprints([odd, same, same.clone()], names)
    assert diffs[0]["ranks"] == [1, 2] and diffs[0]["odd_ranks"] == [0]
    assert checksums.compare_fingerprints([same, same + 1e-9], names, atol=1e-6) == []


def test_shard_report_separates_padding_from_overlap() -> None:
    sampler = load_probe("sampler")
    # 5 items on 2 ranks: DistributedSampler pads one duplicate.
    clean = sampler.shard_report([[0, 2, 4], [1, 3, 0]], 5)
    assert clean["padding_duplicates"] == 1 and clean["excess_duplicates"] == 0
    assert clean["coverage"] == 1.0
    # Every rank reading everything (no DistributedSampler) is overlap, not padding.
    everything = sampler.shard_report([[0, 1, 2, 3], [0, 1, 2, 3]], 4)
    assert everything["excess_duplicates"] == 3 and everything["overlap"] == {"0-1": 4}
    partial = sampler.shard_report([[0, 1, 2], [2, 3, 1]], 6)
    assert partial["overlap"] == {"0-1": 2} and partial["coverage"] == pytest.approx(4 / 6)


@pytest.mark.parametrize(
    ("world", "dtype"),
    [(1, "float32"), (2, "bfloat16"), (7, "float16"), (40, "bfloat16"), (600, "bfloat16")],
)
def test_collective_known_answers_match_brute_force(world: int, dtype: str) -> None:
    torch = pytest.importorskip("torch")
    collective = load_probe("collective")
    pattern = collective._Pattern(world, dtype)
    start, n = 5, 257
    brute = sum(pattern.values(start, n, r, torch.float64, "cpu") for r in range(world))
    assert torch.equal(pattern.total(start, n, "cpu").double(), brute)
    limit = collective.EXACT_INTEGERS[dtype]
    assert brute.abs().max() <= limit  # every partial sum stays exactly representable


def test_rng_fingerprints_follow_the_seed() -> None:
    torch = pytest.importorskip("torch")
    seeds = load_probe("seeds")
    torch.manual_seed(3)
    first = seeds.rng_fingerprints()
    torch.manual_seed(3)
    assert seeds.rng_fingerprints()["torch"] == first["torch"]
    torch.manual_seed(4)
    assert seeds.rng_fingerprints()["torch"] != first["torch"]
    assert {"python", "torch"} <= set(first)


def test_scaler_state_reads_scale_and_growth_tracker() -> None:
    torch = pytest.importorskip("torch")
    scaler_probe = load_probe("scaler")
    scaler = torch.amp.GradScaler("cpu", init_scale=8.0, growth_interval=2)
    assert scaler_probe.scaler_state(scaler) == {"scale": 8.0, "growth_tracker": 0}


@pytest.fixture(scope="module")
def world_of_one():  # type: ignore[no-untyped-def]
    """A one-process gloo group inside the test process, for the checks that need one."""
    torch = pytest.importorskip("torch")
    dist = torch.distributed
    if dist.is_initialized():
        pytest.skip("a process group is already initialised in this process")
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    yield torch
    dist.destroy_process_group()


def test_params_not_in_reducer_finds_added_and_unfrozen(world_of_one: Any) -> None:
    torch = world_of_one
    checksums = load_probe("checksums")
    model = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.Linear(3, 3))
    model[1].weight.requires_grad_(False)
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    assert checksums.params_not_in_reducer(ddp) == []
    model.add_module("adapter", torch.nn.Linear(3, 1))  # added after wrapping
    model[1].weight.requires_grad_(True)  # unfrozen after wrapping
    assert sorted(checksums.params_not_in_reducer(ddp)) == [
        "1.weight",
        "adapter.bias",
        "adapter.weight",
    ]
    assert checksums.params_not_in_reducer(object()) == []  # never crashes on odd input
    del ddp


def test_allreduce_selftest_names_a_corrupting_rank(
    world_of_one: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    collective = load_probe("collective")
    clean = collective.allreduce_selftest(sizes=(1, 1023), dtypes=("float32", "bfloat16"))
    assert clean["ok"] and clean["cases"] == 2 * 2 * len(collective.OPS)
    monkeypatch.setenv("DDPADVISOR_PROBE_FAULT", "corrupt_allreduce:rank=0")
    bad = collective.allreduce_selftest(sizes=(1023,), dtypes=("float16",))
    assert not bad["ok"]
    assert {(f["op"], f["rank"]) for f in bad["failures"]} == {
        ("all_reduce_sum", 0),
        ("all_reduce_avg", 0),
    }


# ---------------------------------------------------------------- failure analysis


def _status(rank: int, state: str, probe: str | None = "collective", error: str | None = None):  # type: ignore[no-untyped-def]
    return {"rank": rank, "pid": 1, "host": "h", "state": state, "probe": probe, "error": error}


TORCHRUN_REPORT = """
Failures:
[1]:
  rank      : 0 (local_rank: 0)
  exitcode  : -15 (pid: 11)  (SIGTERM)
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  rank      : 1 (local_rank: 1)
  exitcode  : 86 (pid: 12)
"""


def test_a_rank_that_hangs_is_blamed_not_the_one_that_timed_out() -> None:
    statuses = {
        0: _status(0, "failed", error="RuntimeError: Timed out waiting 4000ms for recv"),
        1: _status(1, "running"),
    }
    outcomes = classify(2, statuses, "", deadline_hit=False, deadline_s=60)
    assert [o.kind for o in outcomes] == ["waited", "hung"]
    assert [o.rank for o in pick_culprits(outcomes)] == [1]


def test_a_crashed_rank_is_found_from_torchruns_root_cause() -> None:
    statuses = {0: _status(0, "running"), 1: _status(1, "running")}
    outcomes = classify(2, statuses, TORCHRUN_REPORT, deadline_hit=False, deadline_s=60)
    assert outcomes[1].kind == "crashed" and "exit code 86" in outcomes[1].detail
    assert outcomes[0].kind == "stopped"
    assert [o.rank for o in pick_culprits(outcomes)] == [1]


def test_monitored_barrier_names_the_missing_rank() -> None:
    error = "RuntimeError: [Rank 0]: Ranks 2 failed to pass monitoredBarrier in 30000 ms"
    statuses = {
        0: _status(0, "failed", error=error),
        1: _status(1, "failed", error="RuntimeError: Connection closed by peer"),
        2: _status(2, "running", probe="seeds"),
    }
    outcomes = classify(3, statuses, "", deadline_hit=False, deadline_s=60)
    assert [o.rank for o in pick_culprits(outcomes)] == [2]


def test_at_the_deadline_every_unfinished_rank_is_named() -> None:
    statuses = {0: _status(0, "done", probe=None), 1: _status(1, "running")}
    outcomes = classify(3, statuses, "", deadline_hit=True, deadline_s=9)
    assert [(o.rank, o.kind) for o in pick_culprits(outcomes)] == [(1, "hung"), (2, "hung")]
    assert "9 s deadline" in outcomes[1].detail


def test_torchrun_command_uses_the_stock_launcher(tmp_path: Path) -> None:
    single = torchrun_command(LaunchSpec(probes=["env"], out=tmp_path, nproc=3))
    # torchrun's own module, run as `python -m` runs it, under the prelude that skips
    # Python's finalization once it is done
    assert single[1:5] == ["-c", command.FAST_EXIT, "-m", "torch.distributed.run"]
    assert "--standalone" in single
    assert single[single.index("--nproc_per_node") + 1] == "3"
    multi = torchrun_command(
        LaunchSpec(probes=["env"], out=tmp_path, nnodes=2, rdzv_endpoint="10.0.0.1:29400")
    )
    assert "--standalone" not in multi and "10.0.0.1:29400" in multi


FAKE_TORCHRUN = """#!/bin/sh
# Stands in for `python -m torch.distributed.run ... RUNNER --probes ...`: runs the runner as
# rank 0 of 1, then fails the way torchrun does when a worker aborts at exit.
while [ "$#" -gt 0 ] && [ "${1%.py}" = "$1" ]; do shift; done
RANK=0 WORLD_SIZE=1 "PYTHON" "$@"
exit 1
"""

FAKE_RUNNER = """
import json, os, sys
out = sys.argv[sys.argv.index("--out") + 1]
for sub, data in (("env", {"rank": 0, "status": "ok", "seconds": 0}),
                  ("status", {"rank": 0, "pid": os.getpid(), "state": "done"})):
    os.makedirs(os.path.join(out, sub), exist_ok=True)
    with open(os.path.join(out, sub, "rank0.json"), "w") as fh:
        json.dump(data, fh)
os._exit(134)  # as gloo's abort in interpreter teardown would
"""


def test_a_crash_after_every_result_was_written_is_not_a_failure(tmp_path: Path) -> None:
    fake = tmp_path / "fake-python"
    fake.write_text(FAKE_TORCHRUN.replace("PYTHON", sys.executable))
    fake.chmod(0o755)
    runner = tmp_path / "runner.py"
    runner.write_text(FAKE_RUNNER)
    spec = LaunchSpec(
        probes=["env"], out=tmp_path / "out", nproc=1, python=str(fake), runner=runner
    )
    result = launch(spec, progress=None)
    assert result.torchrun_exit_code == 1
    assert result.exit_code == 0 and not result.failed and result.teardown_crash_ignored
    assert json.loads((tmp_path / "out" / "run.json").read_text())["teardown_crash_ignored"]


# ---------------------------------------------------------------- reading results


def _record(probe: str, rank: int, result: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "format": 1,
        "probe": probe,
        "rank": rank,
        "world_size": 2,
        "status": "ok",
        "error": None,
        "subject": "user",
        "summary": "",
        "result": result,
        **extra,
    }


def _write(folder: Path, probe: str, rank: int, data: dict[str, Any] | str) -> Path:
    path = folder / probe / f"rank{rank}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def _facts(got: Any) -> dict[str, Any]:
    return {o.fact: o for o in got.observations}


def test_reader_names_rank_and_warns_about_a_truncated_file(engine: Any, tmp_path: Path) -> None:
    failure = {"op": "all_reduce_sum", "dtype": "float32", "size": 1, "rank": 1, "max_abs_err": 1.0}
    result = {"ok": False, "failures": [failure], "cases": 4, "sizes": [1]}
    _write(tmp_path, "collective", 0, _record("collective", 0, result, subject="environment"))
    truncated = _write(tmp_path, "collective", 1, '{"format": 1, "probe": "coll')
    got = read_probe_results(engine.kb, tmp_path)
    fact = _facts(got)["allreduce_correct"]
    assert fact.value is False and fact.source == "probe"
    assert fact.where == "probe collective rank 1" and "rank 1" in (fact.detail or "")
    assert any(str(truncated) in w and "JSON" in w for w in got.warnings)
    assert not got.failed


def test_reader_reports_a_missing_rank_and_a_failed_run(engine: Any, tmp_path: Path) -> None:
    seeds = {"setup": "m:f", "identical": {"torch": True}, "by_rank": {"torch": ["a", "a"]}}
    _write(tmp_path, "seeds", 0, _record("seeds", 0, seeds))
    (tmp_path / "run.json").write_text(json.dumps({"failed": True, "message": "rank 1 hung"}))
    got = read_probe_results(engine.kb, tmp_path)
    assert got.failed
    assert any("rank1.json" in w and "missing" in w for w in got.warnings)
    assert any("rank 1 hung" in w for w in got.warnings)
    assert _facts(got)["rank_seeds_identical"].value is True


def test_stand_in_passes_are_not_evidence_but_failures_are(engine: Any, tmp_path: Path) -> None:
    diff = {"name": "fc.weight", "ranks": [1], "odd_ranks": [1], "values": [[1, 1], [2, 4]]}
    passing = {"stages": {"after_wrap": {"params": [], "buffers": []}}, "grads_match": True}
    failing = {
        "stages": {
            "after_wrap": {"params": [], "buffers": []},
            "after_steps": {"params": [diff], "buffers": []},
        },
        "model": "built-in",
    }
    _write(tmp_path / "a", "checksums", 0, _record("checksums", 0, passing, subject="builtin"))
    _write(tmp_path / "b", "checksums", 0, _record("checksums", 0, failing, subject="builtin"))
    quiet = read_probe_results(engine.kb, tmp_path / "a")
    assert quiet.observations == [] and any("--model" in w for w in quiet.warnings)
    loud = _facts(read_probe_results(engine.kb, tmp_path / "b"))
    assert loud["param_checksums_match"].value is False
    assert loud["param_checksums_match"].where == "probe checksums rank 1"
    assert "fc.weight" in (loud["param_checksums_match"].detail or "")


def test_reader_turns_a_probe_error_into_a_failed_run(engine: Any, tmp_path: Path) -> None:
    _write(tmp_path, "env", 0, _record("env", 0, {}, status="error", error="RuntimeError: boom"))
    got = read_probe_results(engine.kb, tmp_path)
    assert got.failed and any("boom" in w for w in got.warnings)


def test_reader_rejects_a_folder_without_results(engine: Any, tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no probe results"):
        read_probe_results(engine.kb, tmp_path)
    with pytest.raises(InputError, match="does not exist"):
        read_probe_results(engine.kb, tmp_path / "nope")


# ---------------------------------------------------------------- the command line


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["probe", "nosuch"], "unknown probe 'nosuch'"),
        (["probe", "--model", "no_colon"], "--model expects MODULE:FACTORY"),
        (["probe", "--ddp-kwargs", "{oops"], "--ddp-kwargs is not JSON"),
        (["probe", "--timeout", "0"], "--timeout: must be a number above 0"),
        (["probe", "--nnodes", "2"], "needs --rdzv-endpoint"),
    ],
)
def test_probe_rejects_bad_arguments_in_one_line(
    argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        code = cli_main(argv)
    except SystemExit as exc:  # argparse's own checks (the option types) exit from parsing
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err
    assert needle in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_probe_list_names_every_probe(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["probe", "--list"]) == 0
    listed = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert listed == PROBE_FILES
    from ddpadvisor.bundled import probe_catalog

    assert list(probe_catalog()) == PROBE_FILES


def test_result_files_are_strict_json_with_non_finite_numbers_in_words(tmp_path: Path) -> None:
    harness = load_probe("_harness")
    path = tmp_path / "probe" / "rank0.json"
    harness.write_json(str(path), {"err": [float("nan"), float("inf"), -float("inf"), 1.5]})

    def refuse(token: str) -> None:
        raise AssertionError(f"{token} token in a result file")

    assert json.loads(path.read_text(), parse_constant=refuse) == {
        "err": ["nan", "inf", "-inf", 1.5]
    }
    assert not list(path.parent.glob("*.tmp"))  # written atomically


def test_gathering_goes_through_json(world_of_one: Any) -> None:
    harness = load_probe("_harness")
    sent = (["a", "é"], [[1.0, 2.5e-300]], {"k": None})
    assert harness.all_gather_json(sent, 1) == [[["a", "é"], [[1.0, 2.5e-300]], {"k": None}]]
    assert harness.all_gather_json("", 1) == [""]

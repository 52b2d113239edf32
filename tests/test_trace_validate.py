"""The trace reader validates what it reads: a warning naming file:line and the rest kept, or
exit 2 when nothing usable is left; it never opens FIFOs or devices and never trusts sizes."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from ddpadvisor.errors import InputError
from ddpadvisor.evidence.trace import load_trace, read_trace

REAL = Path(__file__).resolve().parent / "trace_fixtures" / "control_mlp"


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    out = tmp_path / "trace"
    shutil.copytree(REAL, out)
    return out


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _write(path: Path, records: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def _set(path: Path, kind: str, **fields: Any) -> int:
    """Change the first record of ``kind``; returns its line number."""
    recs = _lines(path)
    n = next(i for i, r in enumerate(recs) if r["k"] == kind)
    recs[n].update(fields)
    _write(path, recs)
    return n + 1


def test_the_real_trace_reads_without_warnings(trace, engine):  # type: ignore[no-untyped-def]
    got = read_trace(engine.kb, trace)
    assert got.warnings == []
    assert {o.fact for o in got.observations} >= {"param_checksums_match", "world_size"}


def test_huge_world_size_is_refused_without_allocating(trace, engine):  # type: ignore[no-untyped-def]
    line = _set(trace / "rank1.jsonl", "start", world=1_000_000_000_000)
    got = read_trace(engine.kb, trace)
    assert any(f"rank1.jsonl:{line}: start record: world size" in w for w in got.warnings)


def test_unknown_format_version_skips_the_file(trace, engine):  # type: ignore[no-untyped-def]
    line = _set(trace / "rank1.jsonl", "start", v=99)
    got = read_trace(engine.kb, trace)
    assert any(f"rank1.jsonl:{line}: trace format version 99" in w for w in got.warnings)
    assert any("rank 1 wrote no trace" in w for w in got.warnings)


def test_in_file_rank_must_match_the_file_name(trace, engine):  # type: ignore[no-untyped-def]
    _set(trace / "rank1.jsonl", "start", rank=0)
    got = read_trace(engine.kb, trace)
    assert any("says it is rank 0's trace, its name says rank 1" in w for w in got.warnings)


def test_a_byte_copy_of_another_rank_is_named_and_not_used(trace, engine):  # type: ignore[no-untyped-def]
    shutil.copy(trace / "rank0.jsonl", trace / "rank1.jsonl")
    got = read_trace(engine.kb, trace)
    assert any("rank1.jsonl: a byte-for-byte copy of rank0.jsonl" in w for w in got.warnings)
    # A copy would make every cross-rank comparison agree; without it there is none.
    assert "param_checksums_match" not in {o.fact for o in got.observations}


def test_wrong_types_and_duplicate_keys_are_skipped_with_file_and_line(trace, engine):  # type: ignore[no-untyped-def]
    path = trace / "rank0.jsonl"
    line = _set(path, "step", s="seven")
    text = path.read_text().splitlines()
    text[line] = text[line][:-1] + ', "k": "step"}'  # a duplicate key on the next record
    path.write_text("\n".join(text) + "\n")
    got = read_trace(engine.kb, trace)
    assert any(f"rank0.jsonl:{line}: step record: 's' is not int" in w for w in got.warnings)
    assert any(
        f"rank0.jsonl:{line + 1}: unreadable record (duplicate key" in w for w in got.warnings
    )
    assert got.observations  # the rest is kept


def test_duplicated_steps_and_an_interrupted_run_are_reported(trace, engine):  # type: ignore[no-untyped-def]
    path = trace / "rank1.jsonl"
    recs = _lines(path)
    step = next(r for r in recs if r["k"] == "step")
    cut = next(i for i, r in enumerate(recs) if r["k"] in ("end", "final", "destroy"))
    _write(path, [*recs[:cut], step])
    (trace / "meta.json").unlink()  # no launcher watched the run
    got = read_trace(engine.kb, trace)
    assert any("step 1 recorded more than once" in w for w in got.warnings)
    assert any("without an end record" in w for w in got.warnings)


def test_non_finite_measurements_are_kept_but_non_finite_counters_are_not(trace, engine):  # type: ignore[no-untyped-def]
    path = trace / "rank0.jsonl"
    recs = _lines(path)
    steps = [r for r in recs if r["k"] == "step"]
    steps[0]["loss"] = [float("nan")]  # a measurement: a NaN loss is evidence
    steps[1]["s"] = float("inf")  # a counter: never
    _write(path, recs)
    ranks, _meta, warnings = load_trace(trace)
    assert any("'s' is not int" in w for w in warnings)
    assert math_isnan(ranks[0].steps[steps[0]["s"]]["loss"][0])


def math_isnan(x: Any) -> bool:
    return isinstance(x, float) and x != x


def test_fifo_and_device_files_are_never_opened(trace, engine):  # type: ignore[no-untyped-def]
    (trace / "rank1.jsonl").unlink()
    os.mkfifo(trace / "rank1.jsonl")
    (trace / "meta.json").unlink()
    (trace / "meta.json").symlink_to("/dev/zero")
    got = read_trace(engine.kb, trace)  # would block on the FIFO or never end on /dev/zero
    assert any("rank1.jsonl: not a regular file" in w for w in got.warnings)
    assert any("meta.json: not a regular file" in w for w in got.warnings)


def test_nothing_usable_left_is_exit_2_naming_the_problem(tmp_path):  # type: ignore[no-untyped-def]
    folder = tmp_path / "t"
    folder.mkdir()
    _write(folder / "rank0.jsonl", [{"k": "start", "v": 7, "rank": 0, "world": 1}])
    with pytest.raises(InputError, match=r"no usable trace: .*rank0.jsonl:1: trace format"):
        load_trace(folder)


def test_meta_json_of_the_wrong_shape_is_ignored_with_a_warning(trace, engine):  # type: ignore[no-untyped-def]
    (trace / "meta.json").write_text("[1, 2, 3]")
    got = read_trace(engine.kb, trace)
    assert any("meta.json:1: not a JSON object; ignored" in w for w in got.warnings)

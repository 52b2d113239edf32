"""Property tests over damaged probe result folders: the reader and ``--json`` never crash.

Each case copies a real results folder (2 gloo ranks, tests/probe_fixtures/gloo2), damages one
file (a field set to a hostile value or removed, raw bytes, a FIFO, a device, a copy of
another rank, a deleted folder) and runs ``ddpadvisor --json --probe-results`` in-process:
exit 0 or 3 with one JSON document on stdout, or exit 2 with one line on stderr and nothing
on stdout; never exit 1, never a traceback, never a file's text in the output, every case
within a bounded time (SIGALRM). ``-s`` prints the counts.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import signal
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ddpadvisor.cli import main as cli_main
from ddpadvisor.errors import InputError
from ddpadvisor.evidence.probe_results import MAX_BYTES, read_probe_results
from tests.conftest import REPO

REAL = REPO / "tests" / "probe_fixtures" / "gloo2"
FILES = sorted(str(p.relative_to(REAL)) for p in REAL.rglob("*.json"))
MARKER = "S3CRET-MARKER-7f1d"  # written only into broken bytes: must never be printed
CASE_SECONDS = 10
COUNTS: Counter[str] = Counter()

HOSTILE = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**6), max_value=10**6),
    st.sampled_from([10**12, 10**19, -1, 0, 2**63, 1.5, -0.0, 1e300, "", "x" * 5000]),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=30),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
)
RAW = st.sampled_from(
    [
        "truncate",
        "not_utf8",
        "nan_token",
        "infinity_token",
        "huge_float",
        "long_int",
        "duplicate_key",
        "deep",
        "empty",
        "list",
        "fifo",
        "dev_zero",
        "dev_null",
        "folder",
        "delete",
        "delete_probe",
        "copy_rank0",
        "secret_symlink",
        "half_written",
        "huge",
    ]
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every path to a value inside parsed JSON."""
    if prefix:
        yield prefix
    if isinstance(value, dict):
        for key, child in value.items():
            yield from _paths(child, (*prefix, key))
    elif isinstance(value, list):
        for index, child in enumerate(value[:4]):
            yield from _paths(child, (*prefix, index))


def _set(doc: Any, path: tuple[Any, ...], value: Any, delete: bool) -> None:
    parent = doc
    for step in path[:-1]:
        parent = parent[step]
    if delete:
        del parent[path[-1]]
    else:
        parent[path[-1]] = value


def _damage_raw(folder: Path, rel: str, kind: str) -> None:
    path = folder / rel
    text = path.read_text()
    if kind == "truncate":
        path.write_text(text[: len(text) // 2] + MARKER)
    elif kind == "not_utf8":
        path.write_bytes(b'{"a": "' + MARKER.encode() + b'\xff\xfe"}')
    elif kind in ("nan_token", "infinity_token", "huge_float", "long_int"):
        token = {"nan_token": "NaN", "infinity_token": "-Infinity", "huge_float": "1e400"}
        new = token.get(kind, "9" * 5000)
        path.write_text(text.replace('"rank": ', f'"rank": {new}, "x{MARKER}": ', 1))
    elif kind == "duplicate_key":
        path.write_text(text.replace("{", '{"rank": 0, "rank": 1, "' + MARKER + '": 1,', 1))
    elif kind == "deep":
        path.write_text("[" * 100_000 + MARKER)
    elif kind == "empty":
        path.write_text("")
    elif kind == "list":
        path.write_text(json.dumps([MARKER]))
    elif kind in ("fifo", "dev_zero", "dev_null", "folder", "secret_symlink"):
        path.unlink()
        if kind == "fifo":
            os.mkfifo(path)
        elif kind == "folder":
            path.mkdir()
        else:
            target = {"dev_zero": "/dev/zero", "dev_null": "/dev/null"}.get(kind)
            if target is None:
                secret = folder.parent / "secret.txt"
                secret.write_text(f"password={MARKER}\n")
                target = str(secret)
            path.symlink_to(target)
    elif kind == "delete":
        path.unlink()
    elif kind == "delete_probe":
        shutil.rmtree(path.parent) if path.parent != folder else path.unlink()
    elif kind == "copy_rank0":
        other = path.with_name("rank0.json")
        if other.is_file() and not other.is_symlink() and other != path:
            shutil.copy(other, path)
        else:
            path.write_text(text.replace('"rank": 0', '"rank": 1', 1))
    elif kind == "huge":  # sparse: costs no disk, must not be read
        with path.open("r+b") as fh:
            fh.truncate(MAX_BYTES + 1)
    elif kind == "half_written":
        path.with_name(path.name + ".123.tmp").write_text(text[:10] + MARKER)


class _Timeout(Exception):
    pass


def _on_alarm(signum: int, frame: Any) -> None:
    raise _Timeout


def _run_cli(folder: Path) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    signal.alarm(CASE_SECONDS)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli_main(["--json", "--probe-results", str(folder)])
    except _Timeout:
        COUNTS["hangs"] += 1
        raise AssertionError(f"no answer within {CASE_SECONDS} s") from None
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    return code, out.getvalue(), err.getvalue()


def _check(folder: Path) -> None:
    COUNTS["inputs"] += 1
    code, out, err = _run_cli(folder)
    COUNTS[f"exit {code}"] += 1
    assert code in (0, 2, 3), err
    assert "Traceback" not in err and "internal error" not in err
    assert MARKER not in out and MARKER not in err
    if code == 2:
        assert out == "" and len(err.strip().splitlines()) == 1, err
    else:
        json.loads(out)  # exactly one JSON document


@pytest.fixture(scope="module", autouse=True)
def _report() -> Iterator[None]:
    yield
    print(f"\nprobe folder fuzz: {dict(sorted(COUNTS.items()))}")


FUZZ = settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    database=None,
)


@FUZZ
@given(
    rel=st.sampled_from([f for f in FILES if not f.startswith("status")]),
    pick=st.integers(min_value=0, max_value=10_000),
    value=HOSTILE,
    delete=st.booleans(),
)
def test_a_field_set_to_a_hostile_value_never_crashes(
    rel: str, pick: int, value: Any, delete: bool
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "results"
        shutil.copytree(REAL, folder)
        doc = json.loads((folder / rel).read_text())
        paths = list(_paths(doc))
        _set(doc, paths[pick % len(paths)], value, delete)
        (folder / rel).write_text(json.dumps(doc))
        _check(folder)


@FUZZ
@given(rel=st.sampled_from(FILES), kind=RAW)
def test_damaged_bytes_and_odd_files_never_crash(rel: str, kind: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "results"
        shutil.copytree(REAL, folder)
        _damage_raw(folder, rel, kind)
        _check(folder)


@settings(FUZZ, max_examples=40)
@given(kinds=st.lists(RAW, min_size=len(FILES), max_size=len(FILES)))
def test_every_file_damaged_at_once_never_crashes(kinds: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "results"
        shutil.copytree(REAL, folder)
        for rel, kind in zip(FILES, kinds):
            if (folder / rel).is_file():
                _damage_raw(folder, rel, kind)
        _check(folder)


def test_the_real_folder_reads_cleanly(engine: Any) -> None:
    got = read_probe_results(engine.kb, REAL)
    facts = {o.fact for o in got.observations}
    assert {"allreduce_correct", "world_size", "torch_version", "rank_seeds_identical"} <= facts
    assert not got.failed and not any("ignored" in w for w in got.warnings)


@pytest.mark.parametrize(
    ("kind", "needle"),
    [
        ("copy_rank0", "says rank 0 but is the file of rank 1"),
        ("nan_token", ":4: non-finite number NaN"),
        ("fifo", "not a regular file"),
        ("duplicate_key", "duplicate key"),
        ("half_written", "half-written"),
        ("huge", "byte limit"),
        ("deep", "nested deeper than"),
        ("not_utf8", ":1: not UTF-8 text"),
    ],
)
def test_each_damage_is_named_with_file_and_line(
    engine: Any, tmp_path: Path, kind: str, needle: str
) -> None:
    folder = tmp_path / "results"
    shutil.copytree(REAL, folder)
    _damage_raw(folder, "collective/rank1.json", kind)
    got = read_probe_results(engine.kb, folder)
    hits = [w for w in got.warnings if needle in w]
    assert hits and str(folder / "collective" / "rank1.json") in hits[0], got.warnings
    assert "allreduce_correct" in {o.fact for o in got.observations}  # rank 0's is kept


def test_a_wrong_world_size_or_version_drops_only_that_file(engine: Any, tmp_path: Path) -> None:
    folder = tmp_path / "results"
    shutil.copytree(REAL, folder)
    for rel, key, value in (
        ("env/rank1.json", "world_size", 10**12),
        ("seeds/rank1.json", "format", 99),
    ):
        doc = json.loads((folder / rel).read_text())
        doc[key] = value
        (folder / rel).write_text(json.dumps(doc, indent=1))
    got = read_probe_results(engine.kb, folder)
    assert any("env/rank1.json:" in w and "world size" in w for w in got.warnings)
    assert any("seeds/rank1.json:" in w and "format 99" in w for w in got.warnings)
    assert {"world_size", "rank_seeds_identical"} <= {o.fact for o in got.observations}


def test_nothing_usable_left_is_exit_2(engine: Any, tmp_path: Path) -> None:
    folder = tmp_path / "results"
    shutil.copytree(REAL, folder)
    for path in folder.rglob("rank*.json"):
        if path.parent.name != "status":
            path.write_bytes(b"\xff")
    with pytest.raises(InputError, match="no usable probe result"):
        read_probe_results(engine.kb, folder)


def test_an_interrupted_run_is_warned_about(engine: Any, tmp_path: Path) -> None:
    folder = tmp_path / "results"
    shutil.copytree(REAL, folder)
    shutil.rmtree(folder / "scaler")
    status = json.loads((folder / "status" / "rank1.json").read_text())
    (folder / "status" / "rank1.json").write_text(
        json.dumps({**status, "state": "running", "probe": "scaler"})
    )
    got = read_probe_results(engine.kb, folder)
    assert any("stopped while running in probe scaler" in w for w in got.warnings)
    assert "allreduce_correct" in {o.fact for o in got.observations}

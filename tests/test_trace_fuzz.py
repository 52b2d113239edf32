"""Property-based fuzzing of trace folders: mutations of a real small trace.

``ddpadvisor --json --trace DIR`` (in-process) exits only 0, 2 or 3, writes one JSON document
or nothing to stdout, and finishes each case within 10 seconds (SIGALRM). The counts of
inputs tried and exit codes seen are printed at the end of the module (pytest -s).
FUZZ_EXAMPLES sets the number of cases (default 200).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ddpadvisor.cli import main

REAL = Path(__file__).resolve().parent / "trace_fixtures" / "control_mlp"
FILES = {p.name: p.read_bytes() for p in sorted(REAL.iterdir())}
RANK_FILES = sorted(n for n in FILES if n.endswith(".jsonl"))
SEEN: Counter[str] = Counter()
LIMIT_S = 10

_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.sampled_from([0, 1, -1, 2**63, 10**12, 1_000_000_000_000])
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12)
)
json_values = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4)
    ),
    max_leaves=12,
)
FIELDS = [
    "k",
    "v",
    "rank",
    "world",
    "s",
    "loss",
    "syn",
    "dig",
    "params",
    "params_names",
    "idx",
    "it",
    "sampler",
    "cctx",
    "clip",
    "fac",
    "pre",
    "post",
    "seeds",
    "epoch",
    "scale",
]

mutation = st.one_of(
    st.tuples(
        st.just("set"),
        st.sampled_from(RANK_FILES),
        st.integers(0, 200),
        st.sampled_from(FIELDS),
        json_values,
    ),
    st.tuples(
        st.just("drop"), st.sampled_from(RANK_FILES), st.integers(0, 200), st.sampled_from(FIELDS)
    ),
    st.tuples(st.just("dup"), st.sampled_from(RANK_FILES), st.integers(0, 200)),
    st.tuples(st.just("del"), st.sampled_from(RANK_FILES), st.integers(0, 200)),
    st.tuples(st.just("cut"), st.sampled_from(RANK_FILES), st.integers(0, 30000)),
    st.tuples(
        st.just("bytes"), st.sampled_from(RANK_FILES), st.integers(0, 30000), st.binary(max_size=16)
    ),
    st.tuples(
        st.just("raw"),
        st.sampled_from(RANK_FILES),
        st.integers(0, 200),
        st.sampled_from(
            [
                "[" * 50000,
                "1" * 5000,
                '{"k": "step", "s": ' + "9" * 5000 + "}",
                "NaN",
                '{"k": "start"}',
                "\xff\xfe",
                '{"k": 1}',
            ]
        ),
    ),
    st.tuples(st.just("copy"), st.sampled_from(RANK_FILES), st.sampled_from(RANK_FILES)),
    st.tuples(st.just("rm"), st.sampled_from([*RANK_FILES, "meta.json"])),
    st.tuples(st.just("meta"), json_values),
    st.tuples(st.just("failed"), st.sampled_from(["crashed", "killed", "hung"]), json_values),
)


def _apply(files: dict[str, bytes], m: tuple[Any, ...]) -> None:
    op = m[0]
    if op in ("set", "drop", "dup", "del", "raw"):
        name = m[1]
        if name not in files:
            return
        lines = files[name].split(b"\n")
        i = m[2] % max(1, len(lines))
        if op == "raw":
            lines[i] = m[3].encode("utf-8", "surrogateescape")
        elif op == "dup":
            lines.insert(i, lines[i])
        elif op == "del":
            del lines[i]
        else:
            try:
                rec = json.loads(lines[i])
            except (ValueError, RecursionError):
                return
            if not isinstance(rec, dict):
                return
            if op == "set":
                rec[m[3]] = m[4]
            else:
                rec.pop(m[3], None)
            lines[i] = json.dumps(rec).encode()
        files[name] = b"\n".join(lines)
    elif op == "cut" and m[1] in files:
        files[m[1]] = files[m[1]][: m[2]]
    elif op == "bytes" and m[1] in files:
        data = files[m[1]]
        at = m[2] % max(1, len(data))
        files[m[1]] = data[:at] + m[3] + data[at:]
    elif op == "copy" and m[1] in files:
        files[m[2]] = files[m[1]]
    elif op == "rm":
        files.pop(m[1], None)
    elif op == "meta":
        files["meta.json"] = json.dumps(m[1]).encode()
    elif op == "failed":  # a launcher that saw the run fail, with a message of any shape
        failure = {"kind": m[1], "ranks": [1], "message": m[2]}
        files["meta.json"] = json.dumps({"status": "failed", "failure": failure}).encode()


def _alarm(signum: int, frame: Any) -> None:
    raise TimeoutError(f"a case ran over {LIMIT_S} s")


@pytest.fixture(scope="module", autouse=True)
def _report():  # type: ignore[no-untyped-def]
    yield
    print(
        f"\ntrace fuzz: {SEEN['cases']} inputs; exit codes "
        + ", ".join(f"{k[5:]}: {v}" for k, v in sorted(SEEN.items()) if k.startswith("exit "))
        + f"; hangs: {SEEN['hangs']}"
    )


@settings(
    max_examples=int(os.environ.get("FUZZ_EXAMPLES", "200")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(st.lists(mutation, min_size=1, max_size=3))
def test_mutated_trace_folders_exit_0_2_or_3_with_one_document(mutations):  # type: ignore[no-untyped-def]
    files = dict(FILES)
    for m in mutations:
        _apply(files, m)
    with tempfile.TemporaryDirectory() as tmp:
        for name, data in files.items():
            Path(tmp, name).write_bytes(data)
        out, err = io.StringIO(), io.StringIO()
        previous = signal.signal(signal.SIGALRM, _alarm)
        signal.alarm(LIMIT_S)
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = main(["--json", "--trace", tmp])
        except TimeoutError:
            SEEN["hangs"] += 1
            raise
        finally:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, previous)
    SEEN["cases"] += 1
    SEEN[f"exit {code}"] += 1
    assert code in (0, 2, 3), err.getvalue()
    assert "Traceback" not in err.getvalue()
    text = out.getvalue()
    if text.strip():
        json.loads(text)
    if code == 2:
        assert not text.strip()
        assert len(err.getvalue().strip().splitlines()) == 1

"""Issue 30's audit as tests: outputs never destroy, terminals never obey, special files are
never read, OS and encoding errors are answers, a cache is a cache, and facts have ranges.

Fast: the CLI runs in-process, except where a real file descriptor is the point (a full disk,
a closed pipe, a locale encoding); no torchrun.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ddpadvisor.cli import main
from ddpadvisor.errors import InputError
from ddpadvisor.report.present import diagnose
from ddpadvisor.terminal import emit_json, json_text, shown
from ddpadvisor.yamlio import load_yaml, read_description_text, read_text

REPO = Path(__file__).resolve().parent.parent
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
ESC = "\x1b[2J\x1b]0;pwned\x07"


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exc:  # a usage error, as the console script would exit
        code = int(exc.code or 0)
    got = capsys.readouterr()
    return code, got.out, got.err


def _refused(code: int, err: str, *words: str) -> None:
    assert code == 2, err
    assert err.startswith("ddpadvisor") and err.count("\n") == 1, err
    assert "internal error" not in err
    for w in words:
        assert w in err, err


# -- terminal safety -------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_shown_leaves_no_control_bidi_or_surrogate(text: str) -> None:
    out = shown(text)
    assert not RAW.search(out.replace("\n", "").replace("\t", ""))
    assert not re.search("[\ud800-\udfff]", out)
    out.encode("utf-8")  # always writable
    assert "\n" not in shown(text, one_line=True)


@settings(deadline=None)
@given(st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E)))
def test_shown_keeps_printable_text_as_it_is(text: str) -> None:
    assert shown(text) == text


def test_shown_writes_escapes_visibly() -> None:
    assert shown("a\x1b[2Jb\u202ec\x9b\x7f") == "a\\x1b[2Jb\\u202ec\\x9b\\x7f"


@settings(deadline=None)
@given(st.text())
def test_json_output_stays_exact(text: str) -> None:
    """JSON keeps every value (controls, bidi and lone surrogates included) exactly."""
    from ddpadvisor.observation import Observation

    obs = Observation(fact="gpu_model", value=text, source="set")
    doc = json.loads(json_text(obs))
    assert doc["value"] == text


def test_report_escapes_a_value_from_set(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _cli(capsys, "report", "--set", f"gpu_model={ESC}\u202ex")
    assert code == 0
    assert "\x1b" not in out and "\u202e" not in out
    assert "\\x1b[2J\\x1b]0;pwned\\x07" in out


def test_error_line_escapes_what_the_user_gave(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _cli(capsys, "--json", "--set", f"no_such{ESC}=1")
    _refused(code, err, "\\x1b")
    assert "\x1b" not in err
    code, _, err = _cli(capsys, "--json", "--describe", f"/nonexistent/{ESC}")
    _refused(code, err, "\\x1b")


def test_report_from_json_escapes_its_fields(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert main(["--json", "--set", "world_size=8"]) == 0
    doc = json.loads(capsys.readouterr().out)
    doc["warnings"] = [f"w{ESC}"]
    saved = tmp_path / "d.json"
    saved.write_text(json.dumps(doc))
    code, out, _ = _cli(capsys, "report", "--from-json", str(saved))
    assert code == 0 and "\x1b" not in out and "w\\x1b" in out


def test_ask_and_claims_escape_echoed_text(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _cli(capsys, "ask", f"loss oscillates {ESC} on 8 GPUs")
    assert code == 0 and not RAW.search(out.replace("\n", ""))
    code, out, _ = _cli(capsys, "claims", ESC, "seed")
    assert code == 0 and not RAW.search(out.replace("\n", ""))


# -- outputs that never destroy --------------------------------------------------------------


def test_kb_graph_never_replaces_a_file_without_force(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    mine = tmp_path / "mine.dot"
    mine.write_text("my notes\n")
    code, _, err = _cli(capsys, "kb", "graph", "-o", str(mine))
    _refused(code, err, "--force")
    assert mine.read_text() == "my notes\n"
    mine.chmod(0o640)
    assert main(["kb", "graph", "-o", str(mine), "--force"]) == 0
    assert mine.read_text().startswith("digraph") and (mine.stat().st_mode & 0o777) == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["mine.dot"], "no temporary file left"


@pytest.mark.parametrize("target", ["folder", "missing", "fifo", "proc", "long"])
def test_kb_graph_refuses_what_is_not_a_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, target: str
) -> None:
    path = {
        "folder": tmp_path,
        "missing": tmp_path / "no" / "x.dot",
        "fifo": tmp_path / "f.fifo",
        "proc": Path("/proc/version"),
        "long": tmp_path / ("a" * 300),
    }[target]
    if target == "fifo":
        os.mkfifo(path)
    code, _, err = _cli(capsys, "kb", "graph", "-o", str(path), "--force")
    _refused(code, err)


def test_atomic_write_keeps_the_old_file_when_writing_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ddpadvisor import outputs

    target = tmp_path / "out.txt"
    target.write_text("old")

    def fail(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(outputs.os, "fsync", fail)
    with pytest.raises(InputError, match="No space left"):
        outputs.write_output(target, "new", force=True)
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]


# -- only regular files, bounded ------------------------------------------------------------


def _special(kind: str, tmp_path: Path) -> Path:
    if kind == "fifo":
        path = tmp_path / "in.fifo"
        os.mkfifo(path)
        return path
    if kind == "socket":
        path = tmp_path / "s.sock"
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(path))
        return path
    return Path({"zero": "/dev/zero", "proc": "/proc/self/status", "kmsg": "/proc/kmsg"}[kind])


@pytest.mark.parametrize("kind", ["fifo", "socket", "zero", "proc", "kmsg"])
def test_special_files_are_refused_without_reading(kind: str, tmp_path: Path) -> None:
    path = _special(kind, tmp_path)
    with pytest.raises(InputError) as exc:
        read_text(path)
    assert "not a regular file" in exc.value.message or "no such file" in exc.value.message


@pytest.mark.parametrize("option", ["--describe", "--answers", "--script"])
def test_cli_refuses_a_fifo_as_input(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, option: str
) -> None:
    fifo = _special("fifo", tmp_path)
    code, _, err = _cli(capsys, "--json", option, str(fifo))
    _refused(code, err, "regular file")


_EVENTS = next((REPO / "tests" / "attach_fixtures" / "tensorboard" / "nan").glob("*tfevents*"))


def _event_damage(kind: str, tmp_path: Path) -> Path:
    """An attached TensorBoard event file (or folder) of which not one event can be read."""
    good = _EVENTS.read_bytes()
    path = tmp_path / "events.out.tfevents.1700000000.host"
    if kind == "truncated":
        path.write_bytes(good[:20])
    elif kind == "bad crc":
        path.write_bytes(good[:8] + bytes([good[8] ^ 0xFF]) + good[9:])
    elif kind == "huge length":  # 2**63 - 1 bytes announced, with the length's checksum right
        from ddpadvisor.evidence.files.tensorboard import masked_crc

        head = struct.pack("<Q", (1 << 63) - 1)
        path.write_bytes(head + struct.pack("<I", masked_crc(head)) + good[12:])
    elif kind == "fifo":
        os.mkfifo(path)
    else:  # a folder of 10,000 empty event files
        path = tmp_path / "runs"
        path.mkdir()
        for i in range(10_000):
            (path / f"events.out.tfevents.{i}.host").touch()
    return path


@pytest.mark.parametrize("kind", ["truncated", "bad crc", "huge length", "fifo", "10k empty"])
def test_an_unreadable_event_file_is_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, kind: str
) -> None:
    path = _event_damage(kind, tmp_path)
    code, _, err = _cli(capsys, "--json", "--attach", str(path))
    _refused(code, err, path.name)
    if kind in ("bad crc", "huge length", "truncated"):
        assert "at byte 0" in err


def test_an_event_file_cut_mid_way_keeps_its_events(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    cut = tmp_path / "events.out.tfevents.1700000000.host"
    cut.write_bytes(_EVENTS.read_bytes()[:-30])
    code, out, _ = _cli(capsys, "--json", "--attach", str(cut))
    assert code == 0
    doc = json.loads(out)
    assert any("truncated record at byte" in w for w in doc["warnings"])
    assert any(f["fact"] == "loss_pattern" and f["value"] == "nan" for f in doc["facts"])


def test_ask_refuses_dev_zero_and_an_empty_description(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, _, err = _cli(capsys, "ask", "--describe", "/dev/zero")
    _refused(code, err, "regular file")
    blank = tmp_path / "blank.txt"
    blank.write_text(" \n\t\n")
    for path in (blank, Path(os.devnull)):
        code, _, err = _cli(capsys, "--json", "--describe", str(path))
        _refused(code, err, "empty")


def test_size_cap_says_so(tmp_path: Path) -> None:
    big = tmp_path / "big.txt"
    big.write_text("x" * 2000)
    with pytest.raises(InputError, match="too large"):
        read_description_text(big, max_bytes=1000)


def test_yaml_aliases_are_bounded(tmp_path: Path) -> None:
    laughs = "a: &a [x,x,x,x,x,x,x,x,x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{','.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(8)
    )
    path = tmp_path / "l.yaml"
    path.write_text(laughs)
    with pytest.raises(InputError, match="aliases are expanded"):
        load_yaml(path)
    path.write_text("a: &a [1, 2]\nb: *a\nc: *a\n")  # a few aliases are fine
    assert load_yaml(path) == {"a": [1, 2], "b": [1, 2], "c": [1, 2]}


def test_tui_refuses_to_start_without_a_terminal(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TERM", "dumb")
    code, _, err = _cli(capsys)
    _refused(code, err, "--json")


# -- OS and encoding errors ------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["--json", "--answers"],
        ["--json", "--script"],
        ["--json", "--kb"],
        ["--json", "--describe"],
        ["--json", "--trace"],
        ["--json", "--probe-results"],
        ["report", "--from-json"],
    ],
)
def test_a_name_too_long_is_one_line(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    code, _, err = _cli(capsys, *argv, "a" * 300)
    _refused(code, err)


@pytest.mark.parametrize("top", ["0", "-999999999", "x"])
@pytest.mark.parametrize("command", [["--json"], ["report"], ["ask", "loss spikes"]])
def test_top_must_be_at_least_one(
    capsys: pytest.CaptureFixture[str], top: str, command: list[str]
) -> None:
    code, _, err = _cli(capsys, *command, "--top", top)
    _refused(code, err, "--top")


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("d.json", '{"world_size": ' + "9" * 400 + "}"),
        ("d.yaml", "world_size: " + "9" * 400 + "\n"),
        ("e.yaml", "world_size: " + "9" * 5000 + "\n"),
        ("s.json", '{"gpu_model": "\\ud800x"}'),
    ],
)
def test_huge_integers_and_lone_surrogates_are_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str, text: str
) -> None:
    path = tmp_path / name
    path.write_text(text)
    code, _, err = _cli(capsys, "--json", "--answers", str(path))
    _refused(code, err)


def _run(argv: list[str], **kw: Any) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "PYTHONPATH": str(REPO), **kw.pop("env", {})}
    return subprocess.run(
        [sys.executable, "-m", "ddpadvisor", *argv], env=env, check=False, timeout=60, **kw
    )


@pytest.mark.parametrize("argv", [["--json"], ["report"], ["schema"]])
def test_a_full_disk_is_one_line(argv: list[str]) -> None:
    with open("/dev/full", "wb") as full:
        got = _run(argv, stdout=full, stderr=subprocess.PIPE)
    err = got.stderr.decode()
    assert got.returncode == 2 and err.count("\n") == 1 and "No space left" in err, err


def test_a_closed_pipe_is_quiet() -> None:
    r, w = os.pipe()
    os.close(r)
    try:
        got = _run(["schema"], stdout=w, stderr=subprocess.PIPE)
    finally:
        os.close(w)
    assert got.returncode == 0 and got.stderr == b""


@pytest.mark.parametrize(
    "env",
    [
        {"PYTHONIOENCODING": "ascii"},
        {"PYTHONIOENCODING": "latin-1"},
        {"LC_ALL": "POSIX", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"},
    ],
)
def test_any_output_encoding_writes_the_report(env: dict[str, str]) -> None:
    got = _run(["report", "--lang", "zh", "--set", "world_size=8"], env=env, capture_output=True)
    assert got.returncode == 0, got.stderr
    assert b"\\u" in got.stdout  # what the encoding lacks, as escapes


# -- a cache is a cache -----------------------------------------------------------------------


def _header(fn: Any) -> Any:
    def apply(data: bytes) -> bytes:
        end = data.index(b"\n")
        doc = json.loads(data[:end])
        fn(doc)
        return json.dumps(doc).encode() + data[end:]

    return apply


def _tables(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return list(doc["model"]["facts"].values())


DAMAGE = {
    "truncated half": lambda d: d[: len(d) // 2],
    "truncated header": lambda d: d[: d.index(b"\n") // 2],
    "empty": lambda d: b"",
    "garbage": lambda d: bytes(range(256)) * 16,
    "NaN prior": _header(lambda h: h["model"]["priors"].__setitem__(0, math.nan)),
    "negative prior": _header(lambda h: h["model"]["priors"].__setitem__(0, -0.5)),
    "prior as text": _header(lambda h: h["model"].__setitem__("priors", "common")),
    "short priors": _header(lambda h: h["model"].__setitem__("priors", [0.1])),
    "empty class list": _header(lambda h: [t.__setitem__("classes", []) for t in _tables(h)]),
    "healthy NaN": _header(
        lambda h: [t.__setitem__("healthy", [math.nan] * len(t["healthy"])) for t in _tables(h)]
    ),
    "rows out of range": _header(lambda h: [t.__setitem__("row", [99] * 3) for t in _tables(h)]),
    "no model": _header(lambda h: h.pop("model")),
    "bad offsets": _header(
        lambda h: h["entries"]["causes"].__setitem__("at", [10**9] * 3),
    ),
    "entry garbage": lambda d: d[: d.index(b"\n") + 1] + b"{" * (len(d) - d.index(b"\n") - 1),
    "oversized entry": lambda d: d.replace(b'"title":"', b'"title":"' + b"x" * 5_000_000, 1),
}


@pytest.fixture
def cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("DDPADVISOR_NO_CACHE", raising=False)
    return tmp_path / "cache"


def _top(kb_model: Any) -> str:
    from ddpadvisor.engine.diagnose import Engine
    from ddpadvisor.observation import observe

    kb, model = kb_model
    engine = Engine(kb, model)
    obs = [
        observe(kb, "world_size", 8, "set"),
        observe(kb, "uses_distributed_sampler", False, "set"),
    ]
    return diagnose(engine, [o for o in obs if o]).causes[0].id


@pytest.fixture(scope="module")
def healthy_cache(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The bundled KB's cache as a cold start writes it, and the top cause it gives: built once
    (a build takes seconds), each damage below starts from a copy."""
    from ddpadvisor.bundled import bundled_dir
    from ddpadvisor.engine.cache import load_cached

    home = tmp_path_factory.mktemp("healthy-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_CACHE_HOME", str(home))
        mp.delenv("DDPADVISOR_NO_CACHE", raising=False)
        want = _top(load_cached([bundled_dir("kb")]))
    (path,) = home.rglob("kb-*.json")
    return path, want


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_cache_is_rebuilt_with_one_note(
    healthy_cache: tuple[Path, str],
    cache_home: Path,
    capsys: pytest.CaptureFixture[str],
    damage: str,
) -> None:
    from ddpadvisor.bundled import bundled_dir
    from ddpadvisor.engine.cache import cache_dir, load_cached

    dirs = [bundled_dir("kb")]
    healthy, want = healthy_cache
    cache_dir().mkdir(mode=0o700, parents=True)
    path = cache_dir() / healthy.name
    shutil.copy2(healthy, path)  # as written: the same bytes and the same 0600 mode
    copied = path.stat().st_ino
    assert _top(load_cached(dirs)) == want and capsys.readouterr().err == ""
    assert path.stat().st_ino == copied, "the copy is read as the cache, not rebuilt"
    path.write_bytes(DAMAGE[damage](path.read_bytes()))
    capsys.readouterr()
    assert _top(load_cached(dirs)) == want
    err = capsys.readouterr().err
    assert err.count("\n") <= 1 and "internal" not in err
    assert _top(load_cached(dirs)) == want
    assert capsys.readouterr().err == "", "rebuilt: the next start is quiet"


# -- ranges -----------------------------------------------------------------------------------


@settings(deadline=None)
@given(st.integers(min_value=-(10**20), max_value=10**20))
def test_world_size_accepts_exactly_the_sane_counts(engine: Any, value: int) -> None:
    from ddpadvisor.kb.values import ValueProblem, parse_value

    fact = engine.kb.facts["world_size"]
    if 1 <= value <= 10**15:
        assert parse_value(fact, value) == value
        assert parse_value(fact, str(value)) == value
    else:
        with pytest.raises(ValueProblem):
            parse_value(fact, value)


@settings(deadline=None)
@given(st.floats(allow_nan=True, allow_infinity=True))
def test_adam_beta2_accepts_zero_to_below_one(engine: Any, value: float) -> None:
    from ddpadvisor.kb.values import ValueProblem, parse_value

    fact = engine.kb.facts["adam_beta2"]
    if 0.0 <= value < 1.0:
        assert parse_value(fact, value) == value
    else:
        with pytest.raises(ValueProblem):
            parse_value(fact, value)


@pytest.mark.parametrize(
    "value", ["world_size=0", "grad_accum_steps=0", "per_gpu_batch_size=0", "warmup_steps=-1"]
)
def test_out_of_range_answers_are_refused(capsys: pytest.CaptureFixture[str], value: str) -> None:
    code, _, err = _cli(capsys, "--json", "--set", value)
    _refused(code, err, "must be")


def test_every_count_in_the_kb_has_a_lower_bound(engine: Any) -> None:
    counts = [f for f in engine.kb.facts.values() if f.type == "int"]
    assert counts
    assert [f.id for f in counts if f.min is None and f.exclusive_min is None] == []


@pytest.mark.parametrize(
    ("extra", "problem"),
    [
        ("type: bool\n    min: 1", "only for int and float"),
        ("type: int\n    min: 5\n    max: 1", "range is empty"),
        ("type: float\n    exclusive_min: 0\n    exclusive_max: 0", "range is empty"),
    ],
)
def test_kb_validate_refuses_a_bad_range(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, extra: str, problem: str
) -> None:
    (tmp_path / "f.yaml").write_text(
        f"facts:\n  - id: my_count\n    {extra}\n    question: q?\n    sources: [asked]\n"
    )
    code, _, err = _cli(capsys, "kb", "validate", "--kb", str(tmp_path))
    assert code == 2 and problem in err, err


def test_kb_folder_without_rules_and_duplicate_tests(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, _, err = _cli(capsys, "--json", "--kb", str(tmp_path))
    _refused(code, err, "no rule file")
    (tmp_path / "t.yaml").write_text(
        "tests:\n  - id: same\n    facts: {world_size: 8}\n    expect_top: other\n"
        "  - id: same\n    facts: {world_size: 4}\n    expect_top: other\n"
    )
    code, _, err = _cli(capsys, "kb", "validate", "--kb", str(tmp_path))
    assert code == 2 and "t.yaml:5: duplicate rule test id 'same'" in err, err


def test_emit_json_writes_one_document(capsys: pytest.CaptureFixture[str]) -> None:
    from ddpadvisor.observation import Observation

    emit_json(Observation(fact="gpu_model", value="a\x1bb", source="set"))
    assert json.loads(capsys.readouterr().out)["value"] == "a\x1bb"


@pytest.mark.parametrize("kind", ["cfg", "step", "start"])
def test_a_huge_integer_in_a_trace_record_skips_the_record(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, kind: str
) -> None:
    import shutil

    trace = tmp_path / "t"
    shutil.copytree(REPO / "tests" / "trace_fixtures" / "control_mlp", trace)
    lines = (trace / "rank0.jsonl").read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if json.loads(line)["k"] == kind)
    lines[at] = lines[at][:-1] + ', "huge": ' + "9" * 400 + "}"
    (trace / "rank0.jsonl").write_text("\n".join(lines) + "\n")
    code, out, err = _cli(capsys, "--json", "--trace", str(trace))
    assert code in (0, 2) and "internal error" not in err, err
    if code == 0:
        assert "an integer of 400 digits" in out


@pytest.mark.parametrize("option", ["--script", "--describe", "--answers"])
def test_a_proc_entry_is_refused_unread(capsys: pytest.CaptureFixture[str], option: str) -> None:
    """/proc/kmsg looks like a regular file and blocks on read (where it exists at all)."""
    code, _, err = _cli(capsys, "--json", option, "/proc/kmsg")
    _refused(code, err, "/proc/kmsg")


def test_kb_folder_walk_is_bounded(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ddpadvisor.kb import files

    code, _, err = _cli(capsys, "--json", "--kb", "/proc")
    _refused(code, err, "/proc")
    monkeypatch.setattr(files, "MAX_ENTRIES", 50)
    for i in range(60):
        (tmp_path / f"note{i}.txt").write_text("x")
    code, _, err = _cli(capsys, "--json", "--kb", str(tmp_path))
    _refused(code, err, "more than 50 entries")


def test_closed_stdout_or_stderr_is_an_answer() -> None:
    got = _run(
        ["schema"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        close_fds=True,
        preexec_fn=lambda: os.close(1),
    )
    assert got.returncode == 2 and b"stdout is closed" in got.stderr
    got = _run(
        ["--json", "--set", "world_size=0"],
        capture_output=False,
        stdout=subprocess.PIPE,
        preexec_fn=lambda: os.close(2),
    )
    assert got.returncode == 2 and got.stdout == b"", "no error line on stdout"


def test_tui_refuses_a_fifo_description_before_it_starts(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("ddpadvisor.cli.terminal_problem", lambda: None)
    code, _, err = _cli(capsys, "--describe", str(_special("fifo", tmp_path)))
    _refused(code, err, "regular file")


_FACT_IDS = st.sampled_from(
    [
        "world_size",
        "adam_beta2",
        "grad_accum_steps",
        "gpu_model",
        "loss_pattern",
        "uses_distributed_sampler",
        "warmup_steps",
        "global_batch_ratio",
        "no_such_fact",
    ]
)
_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)


@settings(max_examples=40, deadline=None)
@given(fact=_FACT_IDS, value=st.text(max_size=60))
def test_any_set_value_is_a_diagnosis_or_one_line(fact: str, value: str) -> None:
    import contextlib
    import io

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["report", "--set", f"{fact}={value}"])
    assert code in (0, 2), err.getvalue()
    assert code == 0 or err.getvalue().count("\n") == 1
    assert not RAW.search(out.getvalue().replace("\n", "").replace("\t", ""))
    assert not RAW.search(err.getvalue().replace("\n", ""))


@settings(max_examples=40, deadline=None)
@given(answers=st.dictionaries(_FACT_IDS, _JSON_VALUES, max_size=3))
def test_any_json_answers_file_is_a_diagnosis_or_one_line(
    tmp_path_factory: pytest.TempPathFactory, answers: dict[str, Any]
) -> None:
    import contextlib
    import io

    path = tmp_path_factory.mktemp("answers") / "a.json"
    path.write_text(json.dumps(answers))
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["--json", "--answers", str(path)])
    assert code in (0, 2), err.getvalue()
    if code == 0:
        json.loads(out.getvalue())
    else:
        assert err.getvalue().count("\n") == 1


def test_a_chinese_argument_under_a_posix_locale_is_read() -> None:
    """Under LC_ALL=POSIX Python hands argv's UTF-8 bytes over as surrogate escapes; the
    intake turns them back into the characters (the pattern engine cannot encode surrogates)."""
    from ddpadvisor.evidence.intake import plain

    assert plain("\udce5\udc9b\udc9b") == "四" and plain("a\udcff b") == "a\ufffd b"
    env = {**os.environ, "LC_ALL": "POSIX", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"}
    env.pop("PYTHONIOENCODING", None)
    proc = subprocess.run(
        [sys.executable, "-m", "ddpadvisor", "ask", "--json", "四张卡 loss 震荡"],
        capture_output=True,
        env=env,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    facts = {f["fact"]: f["value"] for f in json.loads(proc.stdout)["facts"]}
    assert facts.get("world_size") == 4 and facts.get("loss_pattern") == "oscillates"

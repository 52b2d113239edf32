"""bench/real_runs.py's parts that need no mirror: its target file, the exact-line edits and
a repository snapshot cut out of a real git repository."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.bench_module import load_bench

real_runs = load_bench("real_runs")


def test_every_target_names_a_builder_and_a_full_commit() -> None:
    targets = real_runs.load_targets()
    assert targets, "bench/real_runs.yaml lists no target"
    for t in targets:
        assert t.data in real_runs.BUILDERS, t.name
        assert len(t.commit) == 40, t.name
        assert t.expect == "correct" or "-" in t.expect, t.name
    assert any(t.expect == "correct" for t in targets) and any(
        t.expect != "correct" for t in targets
    ), "a control and a fault, so the bench can fail either way"


def _target(**kw):  # type: ignore[no-untyped-def]
    base = dict(
        name="t",
        repo="o/n",
        commit="0" * 40,
        script="train.py",
        cwd=".",
        data="minimind_text",
        args=[],
        expect="correct",
    )
    return real_runs.Target(**{**base, **kw})


def test_an_edit_replaces_its_one_line_keeping_the_indent(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("if ddp:\n    model = DDP(model, device_ids=[r])\n")
    edit = real_runs.Edit(old="model = DDP(model, device_ids=[r])", new="model = DDP(model)")
    real_runs.apply_edits(_target(edits=[edit]), tmp_path)
    assert (tmp_path / "train.py").read_text() == "if ddp:\n    model = DDP(model)\n"


@pytest.mark.parametrize("text", ["x = 1\n", "cuda()\ncuda()\n"])
def test_an_edit_that_does_not_match_once_fails_the_target(tmp_path: Path, text: str) -> None:
    (tmp_path / "train.py").write_text(text)
    with pytest.raises(real_runs.TargetProblem, match="not once"):
        real_runs.apply_edits(_target(edits=[real_runs.Edit(old="cuda()", new="pass")]), tmp_path)


def test_only_the_listed_files_are_taken_from_the_mirror(tmp_path: Path) -> None:
    repo = tmp_path / "r"
    repo.mkdir()
    for name, text in {"train.py": "x = 1\n", "model/tok.json": "{}", "big.bin": "x"}.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "x"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True)
    out = tmp_path / "out"
    assert real_runs.extract_python(
        repo / ".git", head.stdout.strip(), out, patterns=("*.py", "model/*.json")
    )
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()) == [
        "model/tok.json",
        "train.py",
    ]


def test_a_target_without_its_mirror_is_skipped(tmp_path: Path) -> None:
    got = real_runs.run_target(_target(), tmp_path, sys.executable, 2, tmp_path / "work")
    assert got.status == "skipped" and "no mirror" in got.why


def test_the_image_builder_writes_decodable_pngs(tmp_path: Path) -> None:
    import struct
    import zlib

    real_runs.image_folder(tmp_path, tmp_path)
    files = sorted((tmp_path / "train").rglob("*.png"))
    assert len(files) == 3 * 32 and len(list((tmp_path / "val").rglob("*.png"))) == 3 * 16
    data = files[0].read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    idat = data.index(b"IDAT")
    (size,) = struct.unpack(">I", data[idat - 4 : idat])
    raw = zlib.decompress(data[idat + 4 : idat + 4 + size])
    assert (width, height) == (32, 32) and len(raw) == height * (1 + width * 3)


def test_a_malformed_target_file_is_one_line_and_exit_2(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "t.yaml"
    bad.write_text(real_runs.TARGETS.read_text().replace("data: minimind_text", "data: nope"))
    assert real_runs.main(["--targets", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no data builder 'nope'" in err
    bad.write_text("targets: [\n")
    assert real_runs.main(["--targets", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "line 2" in err

"""The framework zoo's faulty variants are written from ``# fault NAME:`` notes in a correct
script (tests/frameworks/README.md); no torchrun here."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest
import yaml

FRAMEWORKS = Path(__file__).resolve().parent / "frameworks"
sys.path.insert(0, str(FRAMEWORKS))
import cases as zoo  # noqa: E402  (tests/frameworks/cases.py)
import notes  # noqa: E402  (tests/support/notes.py, on the path cases.py set)

VARIANTS = [c for f in zoo.all_folders() for c in zoo.load_cases(f) if c.origin is not None]


def test_several_notes_on_one_line_each_write_their_own_variant() -> None:
    text = (
        "for x in xs:\n"
        "    with ctx:\n"
        "        y = f(x)  # fault a: y = g(x)  # fault b: <=\n"
        "    z = y  # fault b: -\n"
    )
    assert notes.written(text, notes.fault("a")) == (
        "for x in xs:\n    with ctx:\n        y = g(x)\n    z = y\n"
    )
    assert notes.written(text, notes.fault("b")) == "for x in xs:\n    with ctx:\n    y = f(x)\n"
    assert notes.written(text, notes.fault("c")) == (
        "for x in xs:\n    with ctx:\n        y = f(x)\n    z = y\n"
    )
    assert notes.keys(text) == {"fault a", "fault b"}


def test_the_zoo_has_variants() -> None:
    assert len(VARIANTS) >= 2


@pytest.mark.parametrize("case", VARIANTS, ids=[c.name for c in VARIANTS])
def test_every_variant_is_python_that_differs_from_its_origin(case: zoo.Case) -> None:
    assert case.origin is not None and case.origin.parent == case.script.parent
    assert not case.script.exists(), f"{case.name} is also kept as a file"
    text = zoo.variant_source(case)
    assert ast.dump(ast.parse(text)) != ast.dump(ast.parse(case.origin.read_text()))
    assert notes.keys(text) == set()


@pytest.mark.parametrize("folder", zoo.all_folders(), ids=lambda f: f.name)
def test_every_fault_note_names_a_variant_of_its_script(folder: Path) -> None:
    named = {
        (c.origin.name, notes.fault(c.script.stem)) for c in zoo.load_cases(folder) if c.origin
    }
    found = {(p.name, k) for p in folder.glob("*.py") for k in notes.keys(p.read_text())}
    assert found == named


def _folder(tmp_path: Path, cases: dict[str, object]) -> Path:
    folder = tmp_path / "zoo" / "stack"
    folder.mkdir(parents=True)
    (folder / "cases.yaml").write_text(yaml.safe_dump({"framework": "torch", "cases": cases}))
    (folder / "base.py").write_text("import json\nn = 1  # fault more: n = 2\nprint(n)\n")
    (folder / "other.py").write_text("print(0)\n")
    (folder / "args.json").write_text("{}\n")
    return folder


def test_a_variant_is_written_beside_the_folders_other_files(tmp_path: Path) -> None:
    folder = _folder(
        tmp_path,
        {
            "base.py": {"cause": None},
            "other.py": {"cause": None},
            "more.py": {"from": "base.py", "cause": "c"},
        },
    )
    plain, variant = (
        next(c for c in zoo.load_cases(folder) if c.script.name == n)
        for n in ("base.py", "more.py")
    )
    assert zoo.materialise(plain, tmp_path / "out") is plain
    written = zoo.materialise(variant, tmp_path / "out")
    assert written.name == variant.name == "stack/more.py"
    assert written.cause == "c"
    assert written.script.read_text() == "import json\nn = 2\nprint(n)\n"
    assert sorted(p.name for p in written.script.parent.iterdir()) == ["args.json", "more.py"]


def test_a_variant_without_notes_is_one_clear_error(tmp_path: Path) -> None:
    folder = _folder(tmp_path, {"base.py": {"cause": None}, "less.py": {"from": "base.py"}})
    (variant,) = (c for c in zoo.load_cases(folder) if c.origin is not None)
    with pytest.raises(ValueError, match=r"base\.py has no '# fault less:' notes"):
        zoo.materialise(variant, tmp_path / "out")


def test_a_variant_of_a_missing_script_is_one_clear_error(tmp_path: Path) -> None:
    folder = _folder(tmp_path, {"less.py": {"from": "gone.py"}})
    with pytest.raises(ValueError, match=r"stack/less\.py: from: gone\.py is not a file"):
        zoo.load_cases(folder)

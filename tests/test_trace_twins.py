"""Each faulty zoo script carries its repair as ``# fix:`` notes; the twin is written from them."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest
import yaml

ZOO = Path(__file__).resolve().parent / "zoo"
sys.path.insert(0, str(ZOO))
import twins  # noqa: E402

FAULTY = sorted(
    n for n, c in yaml.safe_load((ZOO / "manifest.yaml").read_text())["cases"].items() if c["cause"]
)


def test_notes_replace_delete_and_insert_at_the_lines_indentation() -> None:
    text = (
        "for i in range(3):\n"
        "    a = i  # fix: b = i || >c = b || <d = 0\n"
        "    e = 1  # fix: -\n"
        "    f = 2  # fix: g = 3 || =\n"
    )
    assert twins.fixed_source(text) == (
        "for i in range(3):\n    b = i\n        c = b\nd = 0\n    g = 3\n    f = 2\n"
    )


@pytest.mark.parametrize("name", FAULTY)
def test_every_faulty_script_writes_a_twin_that_differs_in_code(name: str, tmp_path: Path) -> None:
    assert twins.has_fix(name), f"{name} has no '# fix:' notes"
    twin = twins.write_fixed(name, tmp_path)
    before = ast.dump(ast.parse((ZOO / name).read_text()))
    after = ast.dump(ast.parse(twin.read_text()))  # the twin is valid Python
    assert after != before
    assert " # fix: " not in twin.read_text()

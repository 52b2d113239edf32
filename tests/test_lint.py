"""Lint and types are part of the suite, so `pytest` alone is the whole check."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from tests.conftest import REPO


def _tool(name: str) -> list[str]:
    exe = shutil.which(name, path=str(REPO / ".venv" / "bin")) or shutil.which(name)
    if exe is None:
        pytest.skip(f"{name} is not installed (pip install -e '.[test]')")
    return [exe]


@pytest.mark.parametrize("args", [["check", "."], ["format", "--check", "."]])
def test_ruff(args: list[str]) -> None:
    proc = subprocess.run([*_tool("ruff"), *args], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_mypy_headless_core() -> None:
    proc = subprocess.run([sys.executable, "-m", "mypy"], cwd=REPO, capture_output=True, text=True)
    if "No module named mypy" in proc.stderr:
        pytest.skip("mypy is not installed")
    assert proc.returncode == 0, proc.stdout + proc.stderr

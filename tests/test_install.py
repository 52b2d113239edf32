"""A built (non-editable) wheel carries kb/ and probes/ and works from any directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.conftest import REPO


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(out),
            str(REPO),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    (whl,) = out.glob("ddpadvisor-*.whl")
    return whl


def test_wheel_ships_kb_and_probes(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    assert "ddpadvisor/_bundled/kb/facts.yaml" in names
    assert any(n.startswith("ddpadvisor/_bundled/kb/causes/") for n in names)
    assert any(n.startswith("ddpadvisor/_bundled/probes/") and n.endswith(".py") for n in names)


def test_installed_copy_runs_from_elsewhere(wheel: Path, tmp_path: Path) -> None:
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "-q",
            "--target",
            str(target),
            str(wheel),
        ],
        check=True,
        capture_output=True,
    )
    # The installed copy, not the source tree, must be imported: run from an unrelated folder
    # with only the target (and the test venv's dependencies) on the path.
    env = {**os.environ, "PYTHONPATH": str(target), "DDPADVISOR_NO_USER_KB": "1"}
    cwd = tmp_path
    probe = subprocess.run(
        [sys.executable, "-c", "import ddpadvisor; print(ddpadvisor.__file__)"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert probe.stdout.startswith(str(target))
    val = subprocess.run(
        [sys.executable, "-m", "ddpadvisor", "kb", "validate"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
    )
    assert val.returncode == 0, val.stderr
    assert (
        str(target)
        in subprocess.run(
            [
                sys.executable,
                "-c",
                "from ddpadvisor.bundled import bundled_dir; print(bundled_dir('kb'))",
            ],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    diag = subprocess.run(
        [
            sys.executable,
            "-m",
            "ddpadvisor",
            "--json",
            "--set",
            "single_gpu_converges=true",
            "--set",
            "uses_distributed_sampler=false",
        ],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
    )
    assert diag.returncode == 0, diag.stderr
    doc = json.loads(diag.stdout)
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(
        subprocess.run(
            [sys.executable, "-m", "ddpadvisor", "schema"],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    jsonschema.validate(doc, schema)
    assert doc["causes"][0]["id"] in {c["id"] for c in doc["causes"]}

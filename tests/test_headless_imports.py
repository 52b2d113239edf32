"""The headless core never imports textual, and `--json --answers` never imports torch.

Runs in a fresh interpreter so nothing imported by other tests can hide an import.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# Packages every headless command may load; the TUI's own headless helpers are included
# because the simulated-user tests and `report` rely on them staying free of textual.
HEADLESS_PACKAGES = (
    "ddpadvisor.engine",
    "ddpadvisor.kb",
    "ddpadvisor.evidence",
    "ddpadvisor.report",
)
HEADLESS_MODULES = (
    "ddpadvisor.cli",
    "ddpadvisor.cliutil",
    "ddpadvisor.errors",
    "ddpadvisor.yamlio",
    "ddpadvisor.tui.session",
    "ddpadvisor.tui.runners",
    "ddpadvisor.tui.trace_series",
)

PROGRAM = textwrap.dedent(
    """
    import contextlib, importlib, io, json, pkgutil, sys

    packages, modules, answers = json.loads(sys.argv[1])
    imported = []
    for name in packages:
        package = importlib.import_module(name)
        for info in pkgutil.walk_packages(package.__path__, name + "."):
            importlib.import_module(info.name)
            imported.append(info.name)
    for name in modules:
        importlib.import_module(name)
        imported.append(name)

    from ddpadvisor.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["--json", "--answers", answers])
    document = json.loads(out.getvalue())
    heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("textual", "torch"))
    print(json.dumps({"code": code, "imported": imported, "heavy": heavy,
                      "causes": len(document["causes"])}))
    """
)


def test_headless_modules_import_neither_textual_nor_torch(tmp_path: Path) -> None:
    answers = tmp_path / "answers.yaml"
    answers.write_text("single_gpu_converges: true\nloss_pattern: spikes\n")
    args = json.dumps([HEADLESS_PACKAGES, HEADLESS_MODULES, str(answers)])
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM, args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={"DDPADVISOR_NO_USER_KB": "1", "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["code"] == 0
    assert report["causes"] > 1
    assert "ddpadvisor.engine.diagnose" in report["imported"]
    assert report["heavy"] == []

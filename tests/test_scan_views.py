"""Framework views (ddpadvisor/scan/library/views.py): one per framework, built once per scan,
and the only place rules learn what a framework decides."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from ddpadvisor.scan.interp import Walker
from ddpadvisor.scan.library import views
from ddpadvisor.scan.library.views import SCRIPT, FrameworkView
from ddpadvisor.scan.rules import run_rules
from ddpadvisor.scan.source import load
from tests.conftest import REPO
from tests.scan_support import fixture_path

FRAMEWORKS = REPO / "tests" / "frameworks"
RULES_DIR = REPO / "ddpadvisor" / "scan" / "rules"


@pytest.mark.parametrize(
    ("script", "view"),
    [
        (FRAMEWORKS / "hf_trainer" / "trainer_loss_not_scaled.py", views.HFTrainerView),
        (FRAMEWORKS / "lightning" / "correct_trainer.py", views.LightningView),
        (FRAMEWORKS / "accelerate" / "correct_accumulate.py", views.AccelerateView),
        (fixture_path("healthy_full.py"), None),
    ],
)
def test_the_view_matches_the_framework_and_is_built_once(script: Path, view: type | None) -> None:
    rc = run_rules(Walker(load(script)).run())
    fw = rc.framework
    if view is None:
        assert fw is None and rc.a.framework is None
        return
    assert type(fw) is view
    assert fw is not None and fw.name == rc.a.framework
    assert fw.where  # the line of the framework's object
    assert rc.framework is fw  # one view per scan, shared by every rule


def test_the_base_view_leaves_every_question_to_the_script() -> None:
    """A framework decides only what its class overrides; a new question defaults to SCRIPT."""
    base = FrameworkView.__new__(FrameworkView)
    asked = 0
    for name, fn in inspect.getmembers(FrameworkView, inspect.isfunction):
        if name.startswith("_") or name in ("obj", "note", "averages_gradients", "scales_loss"):
            continue
        args = ["mul"] if name == "loss_world_factor" else []
        assert fn(base, *args) is SCRIPT, name
        asked += 1
    assert asked >= 20


def test_rules_read_frameworks_only_through_the_views() -> None:
    """No rule imports a framework's module (hf_trainer, lightning) or branches on
    Lightning: what a framework decides is asked of rc.framework."""
    offenders: list[str] = []
    for path in RULES_DIR.rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [f"{node.module}.{a.name}" for a in node.names]
                if any(n.endswith((".hf_trainer", ".lightning")) for n in [node.module, *names]):
                    offenders.append(f"{path.name}:{node.lineno}")
            if isinstance(node, ast.Attribute) and node.attr in ("pl", "hf_arg", "pl_arg"):
                offenders.append(f"{path.name}:{node.lineno}")
    assert not offenders

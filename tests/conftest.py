"""Shared fixtures: the repository, the read-only shared/ folder, a loaded engine."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"
SEEDS = SHARED / "seeds"
PYTHON = sys.executable

# Tests never read the developer's own ~/.config/ddpadvisor/kb.
os.environ["DDPADVISOR_NO_USER_KB"] = "1"
# ... nor write the KB cache into the developer's ~/.cache.
os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="ddpadvisor-test-cache-")
# Launched ranks write bytecode as on an ordinary install (and as .ci/run has it): with
# PYTHONDONTWRITEBYTECODE set, every rank recompiled torch._dynamo and sympy from source.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


@pytest.fixture(scope="session")
def engine():  # type: ignore[no-untyped-def]
    from ddpadvisor.engine.diagnose import Engine
    from ddpadvisor.kb.load import default_dirs, load_kb

    kb = load_kb(default_dirs())
    kb.raise_first_problem()
    return Engine(kb)


# The files that take longest (torchrun launches, stall timers), scheduled first: with
# `-n 3 --dist loadfile` xdist hands out whole files in collection order, so a long file
# collected last (alphabetically, test_trace_zoo.py) would run alone at the end.
LONGEST_FIRST = [
    "test_runs_signals.py",
    "test_trace_zoo.py",
    "test_probes_run.py",
    "test_frameworks_heldout.py",
    "test_trace_agent.py",
    "test_trace_install.py",
    "test_frameworks_launch.py",
    "test_frameworks_torch_stacks.py",
    "test_frameworks_hf_trainer.py",
    "test_frameworks_peft.py",
    "test_frameworks_accelerate.py",
    "test_frameworks_lightning.py",
    "test_trace_uneven.py",
    "test_tui_snapshots.py",
]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: rest as collected


@pytest.fixture(autouse=True)
def _tui_language_reset() -> object:
    """A TUI test that switches to Chinese leaves the module-level language behind; the next
    test in the same worker would read zh text. Each test starts in the default language."""
    from ddpadvisor import i18n

    i18n.set_current(i18n.DEFAULT)
    yield
    i18n.set_current(i18n.DEFAULT)

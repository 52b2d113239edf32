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

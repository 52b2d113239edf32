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


# The files that take longest (torchrun launches, stall timers, KB builds), longest first: with
# `-n 3 --dist loadfile` xdist hands out whole files in queue order, so a long file queued last
# would run alone at the end. Ordered by the per-file sums of a `--durations=0` run (a loaded
# machine: the order counts, not the seconds); files not named here take under ~30 s each.
# The two DeepSpeed files wait for .ci/run's background build of DeepSpeed's CPU ops (about
# 3.5 min, longer beside the suite): queued about halfway, where they start once it is done.
LONGEST_FIRST = [
    "test_fuzz_inputs.py",
    "test_probes_run.py",
    "test_trace_zoo.py",
    "test_frameworks_heldout.py",
    "test_hostile_inputs.py",
    "test_tui_snapshots.py",
    "test_kb_loader.py",
    "test_frameworks_torch_stacks.py",
    "test_frameworks_peft.py",
    "test_trace_agent.py",
    "test_trace_install.py",
    "test_kb_cache.py",
    "test_text_linear.py",
    "test_tui_small.py",
    "test_tui.py",
    "test_trace_fuzz.py",
    "test_tui_i18n.py",
    "test_probe_results_fuzz.py",
    "test_frameworks_deepspeed.py",
    "test_runs_signals.py",
    "test_frameworks_heldout_deepspeed.py",
    "test_interview_tui.py",
    "test_install.py",
    "test_trace_loss_factor.py",
    "test_intake_code.py",
    "test_front_door.py",
    "test_i18n.py",
    "test_cli_errors.py",
    "test_tui_curves.py",
    "test_frameworks_accelerate.py",
    "test_trace_uneven.py",
    "test_trace_bootstrap.py",
    "test_lint.py",
    "test_frameworks_hf_trainer.py",
    "test_tui_seeds.py",
    "test_frameworks_lightning.py",
    "test_attach.py",
    "test_attach_tensorboard.py",
    "test_probes_alone.py",
    "test_trace_agent_deepspeed.py",
    "test_trace_devices.py",
    "test_runs_cli.py",
]


def pytest_configure(config: pytest.Config) -> None:
    # pytest-xdist >= 3.7 reorders loadfile's files by their number of tests unless told not
    # to, which queued the long launch files (few tests each) last and LONGEST_FIRST was moot.
    if getattr(config.option, "loadscopereorder", None):
        config.option.loadscopereorder = False


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

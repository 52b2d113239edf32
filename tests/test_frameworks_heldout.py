"""The held-out framework zoo (tests/frameworks_heldout): its jobs run under the trace.

Only that each traced run finishes with optimizer steps recorded on every rank is asserted,
for the correct job(s) of every folder (the faulty variants differ by a few lines; each is
written from its notes and compiled here, and ``bench/frameworks.py --held-out`` traces them
all). How the tool ranks causes on these jobs is reported by that bench and never asserted:
nothing is tuned on this zoo. A folder whose framework is not installed is skipped.

The DeepSpeed folders' runs are in tests/test_frameworks_heldout_deepspeed.py: they wait for
DeepSpeed's CPU ops (built beside the suite by .ci/run), and in a file of their own that wait
neither holds up the other runs nor blocks a worker at the start of the suite.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

FRAMEWORKS = Path(__file__).resolve().parent / "frameworks"
sys.path.insert(0, str(FRAMEWORKS))
from cases import (  # noqa: E402  (tests/frameworks/cases.py)
    HELD_OUT,
    Case,
    Outcome,
    all_folders,
    framework_installed,
    load_cases,
    run_cases,
    variant_source,
)

FOLDERS = all_folders(HELD_OUT)
INSTALLED = [f for f in FOLDERS if framework_installed(f)]
CASES = [case for folder in INSTALLED for case in load_cases(folder)]
# the correct runs; DeepSpeed's: tests/test_frameworks_heldout_deepspeed.py
TRACED = [case for case in CASES if case.cause is None and case.framework != "deepspeed"]

pytestmark = pytest.mark.slow


def test_every_folder_has_a_correct_run_and_two_catalogued_faults(engine: Any) -> None:
    assert {f.name for f in FOLDERS} >= {
        "hf_trainer",
        "peft",
        "accelerate",
        "lightning",
        "torch_stacks",
        "deepspeed",
    }
    for folder in FOLDERS:
        cases = load_cases(folder)
        # a variant (`from:`) is written from its origin's notes, not kept as a file
        assert all((c.origin or c.script).is_file() for c in cases), folder
        assert any(c.cause is None for c in cases), folder
        faults = [c.cause for c in cases if c.cause is not None]
        assert len(faults) >= 2, folder
        assert set(faults) <= set(engine.kb.causes), folder


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory, engine: Any) -> dict[str, Outcome]:
    return run_cases(engine, TRACED, tmp_path_factory.mktemp("heldout"))


@pytest.mark.parametrize(
    "case", [c for f in FOLDERS for c in load_cases(f) if c.origin], ids=lambda c: c.name
)
def test_every_variant_is_written_from_its_notes_and_compiles(case: Case) -> None:
    source = variant_source(case)
    assert source != case.origin.read_text(), "the notes changed nothing"  # type: ignore[union-attr]
    compile(source, str(case.script), "exec")


@pytest.mark.parametrize("case", TRACED, ids=lambda c: c.name)
def test_run_records_steps_on_every_rank(outcomes: dict[str, Outcome], case: Case) -> None:
    outcome = outcomes[case.name]
    assert outcome.status == "ok", outcome.failure
    assert sorted(outcome.steps) == [0, 1], outcome.steps
    assert min(outcome.steps.values()) > 0, outcome.steps

"""The held-out framework zoo's DeepSpeed folders (tests/frameworks_heldout/deepspeed*): the
correct jobs run under the trace, as in tests/test_frameworks_heldout.py, whose bar they share
(the run finishes with optimizer steps recorded on every rank; rankings are never asserted).

A file of its own: the runs wait for DeepSpeed's two CPU ops, which .ci/run builds in the
background (tests/support/deepspeed_ops.py) while the rest of the suite runs.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "frameworks"))
sys.path.insert(0, str(HERE / "support"))
import deepspeed_ops  # noqa: E402  (tests/support/deepspeed_ops.py)
from cases import (  # noqa: E402  (tests/frameworks/cases.py)
    HELD_OUT,
    Case,
    Outcome,
    all_folders,
    framework_installed,
    load_cases,
    run_cases,
)

INSTALLED = [f for f in all_folders(HELD_OUT) if framework_installed(f)]
TRACED = [
    case
    for folder in INSTALLED
    for case in load_cases(folder)
    if case.cause is None and case.framework == "deepspeed"
]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory, engine: Any) -> dict[str, Outcome]:
    state = deepspeed_ops.wait()
    if state.startswith("failed"):
        pytest.fail(f"DeepSpeed's CPU ops did not build: {state}")
    return run_cases(engine, TRACED, tmp_path_factory.mktemp("heldout-deepspeed"))


@pytest.mark.parametrize("case", TRACED, ids=lambda c: c.name)
def test_run_records_steps_on_every_rank(outcomes: dict[str, Outcome], case: Case) -> None:
    outcome = outcomes[case.name]
    assert outcome.status == "ok", outcome.failure
    assert sorted(outcome.steps) == [0, 1], outcome.steps
    assert min(outcome.steps.values()) > 0, outcome.steps

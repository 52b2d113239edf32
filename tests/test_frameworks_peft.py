"""The PEFT zoo (tests/frameworks/peft): each job traced once on 2 CPU ranks.

Correct jobs must rank no catalogued cause first with confidence, by the trace, by --script or
by both; each injected fault must come first by the trace and in the top 3 by --script.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

FRAMEWORKS = Path(__file__).resolve().parent / "frameworks"
sys.path.insert(0, str(FRAMEWORKS))
from cases import (  # noqa: E402  (tests/frameworks/cases.py)
    Outcome,
    facts_line,
    framework_installed,
    load_cases,
    problems,
    run_cases,
)

FOLDER = FRAMEWORKS / "peft"
CASES = load_cases(FOLDER)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not framework_installed(FOLDER), reason="peft is not installed"),
]


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory, engine: Any) -> dict[str, Outcome]:
    return run_cases(engine, CASES, tmp_path_factory.mktemp("peft"))


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.script.name)
def test_case(outcomes: dict[str, Outcome], case: Any) -> None:
    outcome = outcomes[case.name]
    assert problems(outcome) == [], facts_line(outcome)

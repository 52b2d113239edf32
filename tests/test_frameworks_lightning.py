"""The lightning zoo (tests/frameworks/lightning): tiny 2-rank CPU jobs written the way lightning users write
them, each traced once and diagnosed by the trace, by ``--script`` and by both.

The bar is issue 11's (tests/frameworks/cases.problems): optimizer steps on every rank; on a
correct job no catalogued cause first at 0.30 or more; an injected fault first by the trace and
in the top 3 by ``--script``. A failure lists the facts the run produced.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

FRAMEWORKS = Path(__file__).resolve().parent / "frameworks"
FOLDER = FRAMEWORKS / "lightning"
sys.path.insert(0, str(FRAMEWORKS))
import cases as zoo  # noqa: E402  (tests/frameworks/cases.py)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not zoo.framework_installed(FOLDER), reason="lightning is not installed"),
]

CASES = zoo.load_cases(FOLDER)


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory, engine: Any) -> dict[str, zoo.Outcome]:
    """Every case of the folder traced once, two launches at a time."""
    return zoo.run_cases(engine, CASES, tmp_path_factory.mktemp("lightning"))


@pytest.mark.parametrize("case", CASES, ids=[c.script.name for c in CASES])
def test_case(case: zoo.Case, outcomes: dict[str, zoo.Outcome]) -> None:
    outcome = outcomes[case.name]
    assert zoo.problems(outcome) == [], zoo.facts_line(outcome)

"""Plain-torch stacks beyond a bare DDP loop, traced for real (2 gloo ranks on CPU).

tests/frameworks/torch_stacks/cases.yaml lists nanoGPT-style hand loops (a correct one and
three injected faults), FSDP (FullyShardedDataParallel and fully_shard: their parameters are
shards, which must never read as diverged replicas), and DDP with ZeRO-1
(ZeroRedundancyOptimizer, whose optimizer state is partitioned and which re-broadcasts the
parameters after each step). Every case runs once; each test checks issue 11's bar for one.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

FRAMEWORKS = Path(__file__).resolve().parent / "frameworks"
sys.path.insert(0, str(FRAMEWORKS))
import cases as zoo  # noqa: E402  (tests/frameworks/cases.py)

FOLDER = FRAMEWORKS / "torch_stacks"
CASES = zoo.load_cases(FOLDER)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not zoo.framework_installed(FOLDER), reason="torch is not installed"),
]


@pytest.fixture(scope="module")
def outcomes(engine: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("torch_stacks")
    return zoo.run_cases(engine, CASES, root)


@pytest.mark.parametrize("case", CASES, ids=[c.script.name for c in CASES])
def test_case(outcomes: dict[str, Any], case: zoo.Case) -> None:
    outcome = outcomes[case.name]
    assert zoo.problems(outcome) == [], zoo.facts_line(outcome)

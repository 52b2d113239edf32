"""The fork runner the framework zoos use measures what a real ``ddpadvisor trace`` measures.

tests/test_frameworks_<fw>.py trace their cases through tests/support/forkrun.py (torch and the
framework imported once); bench/frameworks.py and users go through torchrun. One correct job
of the two frameworks with the most import-time machinery (the HF Trainer on accelerate, and
Lightning, which reads the rank at import) runs both ways here: same steps, same facts, same
leading causes.
"""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

FRAMEWORKS = Path(__file__).resolve().parent / "frameworks"
sys.path.insert(0, str(FRAMEWORKS))
import cases as zoo  # noqa: E402  (tests/frameworks/cases.py)

pytestmark = pytest.mark.slow

PICKED = [("hf_trainer", "trainer_cli_accum.py"), ("lightning", "correct_trainer.py")]
CASES = [
    next(c for c in zoo.load_cases(FRAMEWORKS / folder) if c.script.name == script)
    for folder, script in PICKED
    if zoo.framework_installed(FRAMEWORKS / folder)
]


@pytest.fixture(scope="module")
def both_ways(tmp_path_factory: pytest.TempPathFactory, engine: Any) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("launch")

    def real(case: zoo.Case) -> tuple[str, zoo.Outcome]:
        return case.name, zoo.run_case(engine, case, root / "real" / case.script.stem)

    with ThreadPoolExecutor(max_workers=1) as pool:  # beside the fork runner's jobs
        reals = pool.map(real, CASES)
        forked = zoo.run_cases(engine, CASES, root / "fork", workers=1)
        return {"real": dict(reals), "fork": forked}


def _same(a: Any, b: Any) -> bool:
    """Equal; measured ratios within 10 % (two real launches of a Trainer job differ by a few
    per cent in synced_grad_norm_ratio: its run is not bit-for-bit repeatable)."""
    if isinstance(a, float) and isinstance(b, float):
        return abs(a - b) <= 0.1 * max(abs(a), abs(b), 1e-9)
    return bool(a == b)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_fork_runner_measures_what_a_real_launch_measures(
    case: zoo.Case, both_ways: dict[str, Any]
) -> None:
    real, forked = both_ways["real"][case.name], both_ways["fork"][case.name]
    assert real.status == forked.status == "ok", (real.failure, forked.failure)
    assert real.steps == forked.steps
    differ = {
        f: (forked.facts.get(f), real.facts.get(f))
        for f in set(real.facts) | set(forked.facts)
        if not _same(real.facts.get(f), forked.facts.get(f))
    }
    assert not differ, f"{case.name}: fact (fork runner, real launch): {differ}"
    assert real.by_trace.ranking[:3] == forked.by_trace.ranking[:3]

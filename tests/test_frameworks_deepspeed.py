"""The DeepSpeed zoo (tests/frameworks/deepspeed) on 2 CPU ranks (DS_ACCELERATOR=cpu, gloo):
jobs driven through deepspeed.initialize, engine.backward and engine.step (ZeRO stages 0-3),
through the HF Trainer with a DeepSpeed config dict and through accelerate's DeepSpeedPlugin.

Each job is traced once (tests/frameworks/cases.py). The bar: optimizer steps on every rank; on
a correct job no catalogued cause first at 0.30 or more, by the trace, by --script or by both;
an injected fault first by the trace and by trace and script together. (The scanner has one
DeepSpeed rule only, weights loaded after initialize, so --script is not held to the top 3.)

DeepSpeed JIT-builds two CPU ops the first time it runs (minutes on CI's 2 cores);
.ci/run builds them in the background (tests/support/deepspeed_ops.py) and the fixture waits
for that build before the first launch.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "frameworks"))
sys.path.insert(0, str(HERE / "support"))
import cases  # noqa: E402  (tests/frameworks/cases.py)
import deepspeed_ops  # noqa: E402  (tests/support/deepspeed_ops.py)

FOLDER = HERE / "frameworks" / "deepspeed"
CASES = cases.load_cases(FOLDER)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not cases.framework_installed(FOLDER), reason="deepspeed is not installed"),
]


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: Any, engine: Any) -> dict[str, cases.Outcome]:
    state = deepspeed_ops.wait()
    if state.startswith("failed"):
        pytest.fail(f"DeepSpeed's CPU ops did not build: {state}")
    return cases.run_cases(engine, CASES, tmp_path_factory.mktemp("deepspeed"))


def problems(outcome: cases.Outcome) -> list[str]:
    c = outcome.case
    if c.cause is None:
        return cases.problems(outcome)
    found = [p for p in cases.problems(outcome) if "by --script" not in p]
    if outcome.by_both.rank(c.cause) != 1:
        found.append(
            f"{c.name}: {c.cause} by trace and script ranked {outcome.by_both.rank(c.cause)}: "
            f"{outcome.by_both.top()}"
        )
    return found


@pytest.mark.parametrize("case", CASES, ids=[c.script.name for c in CASES])
def test_case(outcomes: dict[str, cases.Outcome], case: cases.Case) -> None:
    outcome = outcomes[case.name]
    assert problems(outcome) == [], cases.facts_line(outcome)


def test_partitioned_state_is_never_compared(outcomes: dict[str, cases.Outcome]) -> None:
    """ZeRO's optimizer state (stage >= 1) and stage 3's parameters are each rank's own
    partition: the replicas' comparison leaves them out, and what is replicated matches."""
    for name in ("zero_correct.py", "zero2_correct.py"):
        facts = outcomes[f"deepspeed/{name}"].facts
        assert facts.get("param_checksums_match") is True, (name, facts)
        assert "optimizer_state_match" not in facts, (name, facts)
        assert facts.get("gradient_sync_present") is True, (name, facts)
    facts = outcomes["deepspeed/zero3_correct.py"].facts
    assert "param_checksums_match" not in facts and "optimizer_state_match" not in facts, facts
    assert facts.get("uses_fsdp_or_zero") is True, facts


def test_a_caller_owned_boundary_is_one_window(outcomes: dict[str, cases.Outcome]) -> None:
    """accelerate sets the engine's boundary itself and calls engine.step() at it only (the HF
    Trainer goes through it): as many backward calls per optimizer step as the config's
    gradient_accumulation_steps, like a loop that steps the engine on every micro-batch; the
    loop that skips engine.step() runs twice as many."""
    for name in ("zero_correct.py", "trainer_zero2.py", "accelerate_zero2.py"):
        facts = outcomes[f"deepspeed/{name}"].facts
        assert facts.get("ds_backwards_per_accumulation_window") == 1.0, (name, facts)
    facts = outcomes["deepspeed/zero_step_per_window.py"].facts
    assert facts.get("ds_backwards_per_accumulation_window") == 2.0, facts

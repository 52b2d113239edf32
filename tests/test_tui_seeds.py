"""The seed-thread examples in the TUI, with the bundled KB.

* Loaded from their answers files, the top of the ranking and the refuted forum advice are on
  the first screen at 120x40 without scrolling.
* Started from nothing, a simulated user who knows exactly what the thread states (and answers
  "don't know" to everything else) is asked questions until the ranking settles; the TUI, driven
  by keys, asks the same questions as the headless session. Run with ``-s`` to see the counts.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from test_tui_support import EXAMPLES, PATIENCE, Walk, simulate, truth_from_answers

from ddpadvisor.engine.diagnose import Engine
from ddpadvisor.tui.app import DDPAdvisorApp, create_app
from ddpadvisor.tui.session import Session, format_value
from ddpadvisor.tui.widgets.claims import ClaimsPanel
from ddpadvisor.tui.widgets.ranking import RankingList

# Used only while examples/thread-00N.yaml are not in the tree: what each thread's poster states.
FALLBACK = {
    "thread-000": (
        "single_gpu_converges: true\nloss_pattern: spikes\nuses_lora: true\nworld_size: 8\n"
        "gpu_model: A100\nglobal_batch_ratio: 8\nlr_scaling: linear\n"
        "single_gpu_same_global_batch: false\n"
    ),
    "thread-001": (
        "single_gpu_converges: true\nloss_pattern: oscillates\nworld_size: 4\n"
        "gpu_model: V100\nper_gpu_batch_size: 2\ngrad_accum_steps: 8\n"
        "uses_torch_compile: true\ntorch_version: '2.0'\nuses_lora: false\n"
    ),
}
EXAMPLE_NAMES = sorted(FALLBACK)


@pytest.fixture(params=EXAMPLE_NAMES)
def example(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    name = request.param
    path = EXAMPLES / f"{name}.yaml"
    if path.is_file():
        return path
    fallback = tmp_path / f"{name}.yaml"
    fallback.write_text(FALLBACK[name])
    return fallback


def test_first_screen_shows_top_causes_and_refuted_advice(engine: Engine, example: Path) -> None:
    session = Session(engine)
    session.load("answers", example)
    app = create_app(session=session, show_start=False)

    async def go() -> None:
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause()
            screen = app.screen
            ranking = screen.query_one(RankingList)
            claims = screen.query_one(ClaimsPanel)
            diagnosis = app.session.current
            # The ranking starts at the top cause and shows it, unscrolled, on screen.
            assert ranking.get_option_at_index(0).id == diagnosis.causes[0].id
            assert ranking.scroll_y == 0 and ranking.region.height >= 5
            assert screen.region.contains_region(ranking.region)
            # Refuted advice comes first in the advice panel, which is on screen, unscrolled.
            refuted = [c for c in diagnosis.claims if c.stance == "refuted"]
            assert refuted, "the thread's evidence should refute some forum advice"
            assert claims.claims[0].stance == "refuted"
            assert claims.scroll_y == 0 and claims.region.height >= 5
            assert screen.region.contains_region(claims.region)

    asyncio.run(go())


async def drive(app: DDPAdvisorApp, truth: dict[str, Any], limit: int = 60) -> Walk:
    """The simulated user at the keyboard: number keys for choices, typing for numbers and
    text, Tab+Enter for "don't know" from a typing box, 2 to skip a probe."""
    walk = Walk(tops=[app.session.current.causes[0].id])
    async with app.run_test(size=(80, 24)) as pilot:  # the SSH-sized layout
        await pilot.pause()
        screen = app.diagnose_screen
        for _ in range(limit):
            prompt = screen.prompt
            if prompt is None or walk.unanswered_run() >= PATIENCE:
                break
            walk.asked.append(prompt.fact)
            if prompt.how != "ask":
                await pilot.press("2")
            elif prompt.fact in truth and prompt.choices:
                await pilot.press(str(prompt.choices.index(format_value(truth[prompt.fact])) + 1))
                walk.answered.append(prompt.fact)
            elif prompt.fact in truth:
                entry = screen.query_one("#q-input")
                for key in format_value(truth[prompt.fact]):
                    await pilot.press(key)
                await pilot.press("enter")
                assert entry is not None
                walk.answered.append(prompt.fact)
            elif prompt.choices:
                await pilot.press("0")
            else:
                await pilot.press("tab", "enter")
            await pilot.pause()
            walk.tops.append(app.session.current.causes[0].id)
            if app.session.current.done:
                walk.done_after = len(walk.asked)
                break
    return walk


def test_questions_until_the_top_cause_settles(engine: Engine, example: Path) -> None:
    truth = truth_from_answers(engine, example)
    walk = simulate(Session(engine), truth)
    settled = walk.settled_after()
    # Keys drive the TUI through the walk up to (and a little past) the point where the top
    # cause settles; the full walk runs headless through the same Session API.
    app = create_app(session=Session(engine), show_start=False)
    keyed = asyncio.run(drive(app, truth, limit=max(12, settled + 2)))

    # The TUI asks exactly what the engine ranks best, one question at a time.
    assert keyed.asked == walk.asked[: len(keyed.asked)]
    assert keyed.tops == walk.tops[: len(keyed.tops)]
    assert len(keyed.tops) > settled
    # Every fact the user knew and was asked about is recorded as a TUI answer.
    assert set(app.session.answers) == set(keyed.answered)
    # When the user was asked everything they know, the ranking agrees with loading the same
    # answers at once.
    loaded = Session(engine)
    loaded.load("answers", example)
    if set(walk.answered) == set(truth):
        assert walk.tops[-1] == loaded.current.causes[0].id
    print(
        f"\n{example.stem}: top settled on {walk.tops[-1]} after {settled} questions "
        f"({walk.answered_within(settled)} answered, the rest don't know or skipped probes); "
        f"{len(walk.asked)} asked in all, {len(walk.answered)} of {len(truth)} known facts "
        f"answered; engine settled after: {walk.done_after}; "
        f"all answers at once rank first: {loaded.current.causes[0].id}"
    )

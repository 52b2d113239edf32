"""The TUI's first screen offers "describe the problem": the text is read for facts, shown
with their phrases, and only the ones the user leaves ticked count."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from test_tui_support import FIXTURE_KB, probe_runner, read_description
from textual.widgets import SelectionList, TextArea

from ddpadvisor.engine.diagnose import Engine
from ddpadvisor.kb.load import load_kb
from ddpadvisor.tui.app import DDPAdvisorApp, create_app
from ddpadvisor.tui.screens.describe import DescribeScreen
from ddpadvisor.tui.screens.diagnose import DiagnoseScreen
from ddpadvisor.tui.screens.evidence import CHOICES, EvidenceScreen
from ddpadvisor.tui.session import Session, step_of

INTAKE_KB = Path(__file__).resolve().parent / "snapshots" / "kb-intake"
TEXT = "单卡训练正常，换成 DDP 后 loss 震荡，梯度累积 4，用了 DistributedSampler。"
# ... and a sentence that reads like the fixture KB's sampler-set-epoch-missing
REPEATS = TEXT + "每个 epoch 的打乱顺序都一样，好像一直沿用同一个排列。"
SMALL = (80, 24)
WIDE = (120, 40)


def intake_engine() -> Engine:
    kb = load_kb([FIXTURE_KB, INTAKE_KB])
    kb.raise_first_problem()
    return Engine(kb)


def make_app(**kwargs: Any) -> DDPAdvisorApp:
    return create_app(
        session=Session(intake_engine()),
        probe_runner=probe_runner(),
        trace_runner=probe_runner(),
        **kwargs,
    )


def test_describe_is_offered_first() -> None:
    assert CHOICES[0].id == "describe"


def test_confirmed_findings_count_and_unticked_ones_do_not() -> None:
    app = make_app(show_start=True)

    async def go() -> None:
        async with app.run_test(size=WIDE) as pilot:
            await pilot.pause()
            assert isinstance(app.screen, EvidenceScreen)
            await pilot.press("1")
            await pilot.pause()
            screen = app.screen
            assert isinstance(screen, DescribeScreen)
            screen.query_one("#describe-text", TextArea).text = TEXT
            await read_description(pilot)
            facts = [f.fact for f in screen.findings]
            assert facts == [
                "single_gpu_converges",
                "loss_pattern",
                "grad_accum_steps",
                "uses_distributed_sampler",
            ]
            assert screen.findings[1].phrase == "震荡"
            found = screen.query_one("#describe-found", SelectionList)
            found.deselect(2)  # the user says the accumulation was read wrong
            await pilot.press("ctrl+s")
            await pilot.pause()
            assert isinstance(app.screen, DiagnoseScreen)
            answers = {k: o.value for k, o in app.session.answers.items()}
            assert answers == {
                "single_gpu_converges": True,
                "loss_pattern": "oscillates",
                "uses_distributed_sampler": True,
            }
            assert "震荡" in (app.session.answers["loss_pattern"].detail or "")

    asyncio.run(go())


def test_dont_know_in_the_tui_is_never_asked_again() -> None:
    app = make_app(show_start=False)

    async def go() -> None:
        async with app.run_test(size=WIDE) as pilot:
            await pilot.pause()
            seen: list[str] = []
            for _ in range(6):
                prompt = app.session.next_prompt()
                if prompt is None:
                    break
                # a question is declined by its fact, a probe step ("not now") by its id
                key = step_of(prompt) or prompt.fact
                assert key not in seen
                seen.append(key)
                # The "don't know" action (key d; typed into a number field it is a letter).
                await app.diagnose_screen.run_action("dont_know")
                await pilot.pause()
            assert seen and set(seen) <= app.session.declined
            assert set(seen) <= set(app.session.current.declined)
            offered = {s.id for s in app.session.current.next_steps} | {
                q.fact for q in app.session.current.next_questions
            }
            assert not offered & {k for k in seen}
            assert not offered & {f"ask:{k}" for k in seen}

    asyncio.run(go())


@pytest.mark.parametrize("size", [SMALL, WIDE], ids=["80x24", "120x40"])
def test_describe_snapshot(snap_compare: Any, size: tuple[int, int]) -> None:
    async def read(pilot: Any) -> None:
        await pilot.pause()
        pilot.app.open_describe(REPEATS)
        await pilot.pause()
        await read_description(pilot)

    assert snap_compare(make_app(show_start=False), terminal_size=size, run_before=read)


@pytest.mark.parametrize("keep", [True, False], ids=["ticked", "unticked"])
def test_what_the_text_reads_like_counts_only_while_ticked(keep: bool) -> None:
    app = make_app(show_start=False)

    async def go() -> None:
        async with app.run_test(size=WIDE) as pilot:
            await pilot.pause()
            app.open_describe(REPEATS)
            await pilot.pause()
            await read_description(pilot)
            screen = app.screen
            assert isinstance(screen, DescribeScreen)
            assert [r.cause for r in screen.resemblance] == ["sampler-set-epoch-missing"]
            found = screen.query_one("#describe-found", SelectionList)
            if not keep:
                found.deselect(len(screen.findings))  # the line below the facts
            await pilot.press("ctrl+s")
            await pilot.pause()
            lead = app.session.current.causes[0]
            described = [e for e in lead.evidence if e.fact == "description"]
            assert bool(app.session.resemblance) is keep
            assert (lead.id == "sampler-set-epoch-missing" and bool(described)) is keep

    asyncio.run(go())


def test_a_failed_verify_in_the_fix_screen_lowers_its_cause() -> None:
    app = make_app(show_start=False)

    async def go() -> None:
        async with app.run_test(size=WIDE) as pilot:
            await pilot.pause()
            app.session.answer("uses_distributed_sampler", "否")
            app.changed("answer")
            lead = app.session.current.causes[0]
            assert lead.id == "no-distributed-sampler" and lead.fixes
            app.open_fix(lead.id, lead.fixes[0])
            await pilot.pause()
            await pilot.press("n")
            await pilot.pause()
            after = {c.id: c.score for c in app.session.current.causes}
            assert after[lead.id] < lead.score
            assert app.session.current.verified == {lead.fixes[0].id: "failed"}

    asyncio.run(go())


def test_describe_file_opens_prefilled() -> None:
    app = make_app(show_start=True, describe_text=TEXT)

    async def go() -> None:
        async with app.run_test(size=SMALL) as pilot:
            await pilot.pause()
            screen = app.screen
            assert isinstance(screen, DescribeScreen)
            assert screen.query_one("#describe-text", TextArea).text == TEXT
            assert app.session.answers == {}  # nothing counts before it is confirmed
            await read_description(pilot)
            await pilot.press("ctrl+s")
            await pilot.pause()
            assert len(app.session.answers) == 4

    asyncio.run(go())


def test_a_saved_session_keeps_declined_and_verified(tmp_path: Path) -> None:
    session = Session(intake_engine())
    session.answer("uses_distributed_sampler", "false")
    session.answer("loss_pattern", "不知道")
    session.verify_result("shard-with-sampler", "failed")
    saved = tmp_path / "s.json"
    session.export(saved, "json")
    again = Session(intake_engine())
    again.load("answers", saved)
    assert "loss_pattern" in again.declined
    assert again.verified == {"shard-with-sampler": "failed"}
    assert again.current.model_dump() == session.current.model_dump()


def test_pasted_code_is_scanned_in_the_describe_screen() -> None:
    from ddpadvisor.service import load_engine

    app = create_app(
        session=Session(load_engine()),
        probe_runner=probe_runner(),
        trace_runner=probe_runner(),
        show_start=True,
    )
    text = (
        "Loss oscillates on 2 GPUs.\n```\nmodel = DDP(model)\nfor x, y in loader:\n"
        "    loss = crit(model.module(x), y)\n    loss.backward()\n```"
    )

    async def go() -> None:
        async with app.run_test(size=WIDE) as pilot:
            await pilot.pause()
            await pilot.press("1")
            await pilot.pause()
            screen = app.screen
            assert isinstance(screen, DescribeScreen)
            screen.query_one("#describe-text", TextArea).text = text
            await read_description(pilot)
            by_fact = {f.fact: f for f in screen.findings}
            bypass = by_fact["forward_bypasses_ddp"]
            assert (bypass.value, bypass.origin) == (True, "code")
            assert bypass.phrase == "loss = crit(model.module(x), y)"
            assert by_fact["loss_pattern"].origin == "text"
            await pilot.press("ctrl+s")
            await pilot.pause()
            assert app.session.answers["forward_bypasses_ddp"].value is True

    asyncio.run(go())

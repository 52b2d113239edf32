"""The TUI in Chinese: switching language mid-session keeps the session, and double-width text
is laid out by cells (nothing cut off, bars and columns aligned) at 80x24 and 120x40."""

from __future__ import annotations

import asyncio
import io
import re
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import pytest
from rich.cells import cell_len
from rich.console import Console
from test_tui_support import fixture_engine, probe_runner
from textual.content import Content

from ddpadvisor.i18n import current
from ddpadvisor.tui.app import DDPAdvisorApp, create_app
from ddpadvisor.tui.layout_text import hang, pad, paragraph, wrap
from ddpadvisor.tui.screens.diagnose import DiagnoseScreen
from ddpadvisor.tui.screens.results import ResultsScreen
from ddpadvisor.tui.session import Session
from ddpadvisor.tui.widgets.question import QuestionPanel
from ddpadvisor.tui.widgets.summary import SummaryBar

SIZES = [(80, 24), (120, 40)]
IDS = ["80x24", "120x40"]
ANSWERS = "single_gpu_converges: true\nloss_pattern: spikes\ngrad_accum_steps: 4\n"
CJK = re.compile(r"[\u3400-\u9fff]")
SCROLLBAR = "▁▂▃▄▅▆▇█"


def run(coro: Awaitable[None]) -> None:
    asyncio.run(coro)  # type: ignore[arg-type]


def make_app(tmp_path: Path, lang: str = "en") -> DDPAdvisorApp:
    session = Session(fixture_engine(), lang=lang)  # type: ignore[arg-type]
    path = tmp_path / "answers.yaml"
    path.write_text(ANSWERS)
    session.load("answers", path)
    return create_app(
        session=session, probe_runner=probe_runner(), trace_runner=probe_runner(), show_start=False
    )


def screen_text(app: DDPAdvisorApp) -> list[str]:
    """What the terminal shows, line by line, as plain text."""
    width, height = app.size
    console = Console(
        width=width, height=height, file=io.StringIO(), record=True, color_system=None
    )
    console.print(
        app.screen._compositor.render_update(full=True, screen_stack=app._background_screens)
    )
    return console.export_text().splitlines()


def footer_descriptions(app: DDPAdvisorApp) -> set[str]:
    return {b.binding.description for b in app.screen.active_bindings.values()}


# -- switching at run time ------------------------------------------------------------------------
def test_l_switches_language_mid_session_keeping_every_answer(tmp_path: Path) -> None:
    async def go() -> None:
        app = make_app(tmp_path)
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause()
            await pilot.press("2")  # answer the first question: "no"
            await pilot.pause()
            session = app.session
            answers = dict(session.answers)
            facts = [(f.fact, f.value) for f in session.current.facts]
            ranking = [(c.id, c.score) for c in session.current.causes]
            assert answers and "Skip" in footer_descriptions(app)
            english_question = app.screen.query_one(QuestionPanel).prompt

            await pilot.press("l")
            await pilot.pause()
            assert app.lang == "zh" and current() == "zh"
            assert session.current.lang == "zh"
            assert dict(session.answers) == answers
            assert [(f.fact, f.value) for f in session.current.facts] == facts
            assert [(c.id, c.score) for c in session.current.causes] == ranking
            assert "跳过" in footer_descriptions(app) and "Skip" not in footer_descriptions(app)
            text = "\n".join(screen_text(app))
            assert "原因（按可能性排序）" in text and "为什么是" in text
            assert CJK.search(app.screen.query_one(SummaryBar).render().plain)  # type: ignore[union-attr]
            zh_question = app.screen.query_one(QuestionPanel).prompt
            assert english_question is not None and zh_question is not None
            assert zh_question.fact == english_question.fact
            assert zh_question.question != english_question.question

            # keep going in Chinese, then open the results: they follow the language
            await pilot.press("1")
            await pilot.pause()
            assert len(session.answers) == len(answers) + 1
            await pilot.press("f")
            await pilot.pause()
            assert isinstance(app.screen, ResultsScreen)
            assert "原因与修复" in "\n".join(screen_text(app))

            # back to English on the results screen: still every answer, English labels
            await pilot.press("l")
            await pilot.pause()
            assert app.lang == "en" and len(session.answers) == len(answers) + 1
            text = "\n".join(screen_text(app))
            assert "Causes & fixes" in text and not CJK.search(text)
            await pilot.press("escape")
            await pilot.pause()
            assert isinstance(app.screen, DiagnoseScreen)
            assert not CJK.search("\n".join(screen_text(app)))

    run(go())


def test_lang_option_and_locale_choose_the_tui_language(monkeypatch: Any) -> None:
    import argparse

    from ddpadvisor.tui.app import session_from_args

    args = argparse.Namespace(
        kb_dirs=[], answers=[], sets=[], scripts=[], probe_results=[], traces=[], gpu="unknown"
    )
    monkeypatch.delenv("LC_ALL", raising=False)
    monkeypatch.delenv("LC_MESSAGES", raising=False)
    monkeypatch.setenv("LANG", "zh_CN.UTF-8")
    args.lang = None
    assert session_from_args(args).lang == "zh"
    args.lang = "en"
    assert session_from_args(args).lang == "en"


# -- layout of double-width text ------------------------------------------------------------------
@pytest.mark.parametrize("size", SIZES, ids=IDS)
@pytest.mark.parametrize("keys", [["2"], ["2", "f"], ["2", "f", "a"], ["2", "f", "x"]])
def test_chinese_screens_fit_the_terminal(
    tmp_path: Path, size: tuple[int, int], keys: list[str]
) -> None:
    async def go() -> None:
        app = make_app(tmp_path, "zh")
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            for key in keys:
                await pilot.press(key)
                await pilot.pause()
            lines = screen_text(app)
            assert len(lines) == size[1]
            assert all(cell_len(line) <= size[0] for line in lines)
            # Every box closes on the same column it opened: no wide character pushed a border.
            for line in lines:
                if line.startswith(("│", "╭", "╰")):
                    assert line.rstrip()[-1] in "│╮╯" + SCROLLBAR, line

    run(go())


@pytest.mark.parametrize("size", SIZES, ids=IDS)
def test_ranking_bars_line_up_in_chinese(tmp_path: Path, size: tuple[int, int]) -> None:
    async def go() -> None:
        app = make_app(tmp_path, "zh")
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            await pilot.press("2")
            await pilot.pause()
            rows = [ln for ln in screen_text(app) if re.search(r"[█░]{6,}\s+\d+%", ln)]
            assert len(rows) >= 5
            ends = set()
            for row in rows:
                m = re.search(r"[█░]+\s+\d+%", row)
                assert m is not None
                ends.add(cell_len(row[: m.end()]))
            assert len(ends) == 1  # the % column sits at one cell for every row
            assert any("（无已收录故障）" in row for row in rows)  # the catch-all, whole

    run(go())


@pytest.mark.parametrize("size", SIZES, ids=IDS)
def test_no_chinese_text_is_lost_in_the_why_panel(tmp_path: Path, size: tuple[int, int]) -> None:
    async def go() -> None:
        app = make_app(tmp_path, "zh")
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            await pilot.press("2", "v") if size == (80, 24) else await pilot.press("2")
            await pilot.pause()
            mechanism = app.session.current.causes[0].mechanism
            shown = "".join(ln.strip("│ ╭╮╰╯─") for ln in screen_text(app))
            want = re.sub(r"\s", "", mechanism)
            got = re.sub(r"[\s│]", "", shown)
            assert want[:20] in got and want[-10:] in got

    run(go())


def test_wrap_counts_cells_and_keeps_every_character() -> None:
    text = "在用 DDP 包装之前应用 get_peft_model，再构造 DistributedDataParallel；" * 5
    styled = Content.assemble(("在用", "bold"), text)
    for width in (12, 20, 37, 58):
        lines = wrap(styled, width)
        assert all(line.cell_length <= width for line in lines)
        joined = "".join(line.plain for line in lines).replace(" ", "")
        assert joined == styled.plain.replace(" ", "")
        assert not any(line.plain.startswith(("，", "；")) for line in lines)
    assert wrap(styled, 20)[0].spans  # styles survive the cut


def test_english_text_wraps_as_textual_wraps_it() -> None:
    body = Content("single_gpu_converges = true  answer · answers.yaml:1 and more words here")
    assert [c.plain for c in wrap(body, 24)] == [c.plain for c in body.wrap(24)]
    assert paragraph("plain English stays one piece", 10).plain == "plain English stays one piece"


def test_hang_and_pad_measure_cells() -> None:
    head = Content("不成立 ")
    out = hang(head, Content("给每个 rank 设置不同的 sampler seed，否则分片会重叠。"), 30)
    lines = out.plain.splitlines()
    assert len(lines) > 1 and all(cell_len(ln) <= 30 for ln in lines)
    assert all(ln.startswith(" " * head.cell_length) for ln in lines[1:])
    assert cell_len(pad("不成立", 9)) == 9 and cell_len(pad("REFUTED", 9)) == 9


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_summary_line_keeps_its_state_when_narrow(lang: str) -> None:
    from ddpadvisor.i18n import set_current, t
    from ddpadvisor.tui.widgets.summary import summary_content

    set_current(lang)  # type: ignore[arg-type]
    try:
        session = Session(fixture_engine(), lang=lang)  # type: ignore[arg-type]
        full = summary_content(session.current, 12)
        narrow = summary_content(session.current, 12, width=full.cell_length - 1)
        assert narrow.cell_length < full.cell_length
        assert narrow.plain.endswith(t("asking"))
        assert summary_content(session.current, 12, width=full.cell_length) == full
    finally:
        set_current("en")

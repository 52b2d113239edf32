"""Pilot tests of the TUI: a full session driven by keys, asserting on state and messages.

The app runs headless through ``App.run_test``; waits are ``pilot.pause()`` and
``app.workers.wait_for_complete()``, never sleeps. These tests use the frozen KB in
tests/snapshots/kb so they do not move when the bundled kb/ grows.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from test_tui_support import FakeRunner, fixture_engine, probe_runner, run_settled, write_trace
from textual.message import Message
from textual.widgets import DataTable, Input

from ddpadvisor.report.text import render_markdown
from ddpadvisor.tui.app import DDPAdvisorApp, create_app
from ddpadvisor.tui.messages import (
    DiagnosisUpdated,
    EvidenceLoaded,
    ReportExported,
    RunEnded,
    RunFinished,
    RunProgressed,
    RunStarted,
)
from ddpadvisor.tui.screens.diagnose import DiagnoseScreen
from ddpadvisor.tui.screens.evidence import EvidenceScreen
from ddpadvisor.tui.screens.export import ExportScreen
from ddpadvisor.tui.screens.fix import FixScreen
from ddpadvisor.tui.screens.results import ResultsScreen
from ddpadvisor.tui.screens.run import RunScreen
from ddpadvisor.tui.session import Session, format_value
from ddpadvisor.tui.widgets.question import QuestionPanel
from ddpadvisor.tui.widgets.rank_plot import MARKERS, RankPlot
from ddpadvisor.tui.widgets.ranking import RankingList
from ddpadvisor.tui.widgets.why import WhyPanel

T = TypeVar("T", bound=Message)

WIDE = (120, 40)
SMALL = (80, 24)


def run(coro: Awaitable[None]) -> None:
    asyncio.run(coro)  # type: ignore[arg-type]


def of_type(messages: list[Message], kind: type[T]) -> list[T]:
    """Messages of one kind, each once (the hook sees a bubbling message at every node)."""
    seen: set[int] = set()
    out = []
    for m in messages:
        if isinstance(m, kind) and id(m) not in seen:
            seen.add(id(m))
            out.append(m)
    return out


def ranking_of(app: DDPAdvisorApp) -> list[tuple[str, float]]:
    return [(c.id, round(c.score, 6)) for c in app.session.current.causes]


def make_app(**kwargs: Any) -> DDPAdvisorApp:
    kwargs.setdefault("show_start", False)
    return create_app(
        session=kwargs.pop("session", None) or Session(fixture_engine()),
        probe_runner=kwargs.pop("probe_runner", None) or probe_runner(),
        trace_runner=kwargs.pop("trace_runner", None) or probe_runner(),
        **kwargs,
    )


async def answer_shown(pilot: Any, screen: DiagnoseScreen, value: str) -> None:
    """Answer the question on screen with ``value`` the way a user would: its number key,
    or typing into the box for numbers and text."""
    prompt = screen.prompt
    assert prompt is not None
    if prompt.choices:
        await pilot.press(str(prompt.choices.index(value) + 1))
    else:
        entry = screen.query_one("#q-input", Input)
        entry.focus()
        entry.value = value
        await pilot.press("enter")
    await pilot.pause()


def first_choice_other_than(screen: DiagnoseScreen, value: Any) -> str:
    prompt = screen.prompt
    assert prompt is not None and prompt.choices
    return next(c for c in prompt.choices if c != format_value(value))


def with_app(
    body: Callable[[DDPAdvisorApp, Any, list[Message]], Awaitable[None]],
    *,
    size: tuple[int, int] = WIDE,
    **kwargs: Any,
) -> None:
    app = make_app(**kwargs)
    messages: list[Message] = []

    async def go() -> None:
        async with app.run_test(size=size, message_hook=messages.append) as pilot:
            await pilot.pause()
            await body(app, pilot, messages)

    run(go())


# -- the whole session ----------------------------------------------------------------------------


def test_full_session(tmp_path: Path) -> None:
    """Start, answer, watch the ranking move, change an earlier answer, run a probe with
    progress, open a fix and copy its verify command, export a report."""
    fake = probe_runner()

    async def body(app: DDPAdvisorApp, pilot: Any, messages: list[Message]) -> None:
        assert isinstance(app.screen, EvidenceScreen)
        await pilot.press("2")  # start with nothing (1 is "describe the problem")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, DiagnoseScreen)

        # Answer three questions; every answer re-ranks and says so.
        answered = []
        for _ in range(3):
            prompt = screen.prompt
            assert prompt is not None and prompt.how == "ask"
            before = ranking_of(app)
            updates = len(of_type(messages, DiagnosisUpdated))
            value = prompt.choices[-1] if prompt.choices else "4"
            await answer_shown(pilot, screen, value)
            answered.append(prompt.fact)
            assert format_value(app.session.answers[prompt.fact].value) == value
            assert app.session.answers[prompt.fact].where == "tui"
            new = of_type(messages, DiagnosisUpdated)[updates:]
            assert [m.reason for m in new] == [f"answered {prompt.fact}"]
            assert ranking_of(app) != before
            shown = screen.query_one(RankingList)
            assert shown.get_option_at_index(0).id == app.session.current.causes[0].id
        assert list(app.session.answers) == answered

        # Back to the newest answer, change it: the ranking follows at once, order is kept.
        await pilot.press("b")
        await pilot.pause()
        assert screen.editing == answered[-1]
        panel = screen.query_one(QuestionPanel)
        assert panel.prompt is not None and panel.prompt.editing
        before = ranking_of(app)
        old = app.session.answers[answered[-1]].value
        if panel.prompt.choices:
            await answer_shown(pilot, screen, first_choice_other_than(screen, old))
        else:
            await answer_shown(pilot, screen, "1")
        assert app.session.answers[answered[-1]].value != old
        assert list(app.session.answers) == answered
        assert screen.editing is None
        assert ranking_of(app) != before
        assert of_type(messages, DiagnosisUpdated)[-1].reason == f"answered {answered[-1]}"

        # Run a (fake) probe: progress messages, a per-rank table, evidence added.
        await pilot.press("r")
        await run_settled(pilot)
        assert len(of_type(messages, RunStarted)) == 1
        steps = [m.progress.done for m in of_type(messages, RunProgressed)]
        assert steps == [1, 2, 3]
        finished = of_type(messages, RunFinished)
        assert len(finished) == 1 and not finished[0].outcome.failed
        table = app.screen.query_one("#run-table", DataTable)
        assert table.row_count == len(fake.rows)
        facts = {f.fact: f for f in app.session.current.facts}
        assert facts["sampler_shards_overlap"].source == "probe"
        assert of_type(messages, DiagnosisUpdated)[-1].reason == "probe finished"
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is screen

        # Results, then a fix of the top cause; `c` copies the verify command.
        top = app.session.current.causes[0]
        assert top.fixes, "the fixture's top cause should have a fix"
        await pilot.press("f")
        await pilot.pause()
        assert isinstance(app.screen, ResultsScreen)
        await pilot.press("x")
        await pilot.pause()
        assert isinstance(app.screen, FixScreen)
        assert app.screen.fix.id == top.fixes[0].id
        await pilot.press("c")
        await pilot.pause()
        assert app.clipboard == top.fixes[0].verify.command
        await pilot.press("escape", "escape")
        await pilot.pause()
        assert app.screen is screen

        # Export the session as Markdown: the same text `ddpadvisor report --markdown` renders.
        await pilot.press("e")
        await pilot.pause()
        assert isinstance(app.screen, ExportScreen)
        target = tmp_path / "session.md"
        app.screen.query_one("#export-path", Input).value = str(target)
        await pilot.press("enter")
        await pilot.pause()
        assert target.read_text() == render_markdown(app.session.current)
        exported = of_type(messages, ReportExported)
        assert [(m.path, m.fmt) for m in exported] == [(target, "markdown")]
        assert app.screen is screen

    with_app(body, show_start=True, probe_runner=fake)


def test_dont_know_removes_the_answer() -> None:
    async def body(app: DDPAdvisorApp, pilot: Any, messages: list[Message]) -> None:
        screen = app.diagnose_screen
        first = screen.prompt
        assert first is not None and first.choices
        start = ranking_of(app)
        await answer_shown(pilot, screen, first.choices[0])
        assert first.fact in app.session.answers
        await pilot.press("b")
        await pilot.pause()
        await pilot.press("d")
        await pilot.pause()
        assert first.fact not in app.session.answers
        assert first.fact in app.session.declined
        assert first.fact not in {f.fact for f in app.session.current.facts}
        assert ranking_of(app) == start  # nothing else was observed
        assert screen.prompt is not None and screen.prompt.fact != first.fact

    with_app(body)


def test_skip_asks_something_else() -> None:
    async def body(app: DDPAdvisorApp, pilot: Any, messages: list[Message]) -> None:
        screen = app.diagnose_screen
        first = screen.prompt
        assert first is not None
        await pilot.press("s")
        await pilot.pause()
        assert screen.prompt is not None and screen.prompt.fact != first.fact
        assert first.fact not in app.session.answers

    with_app(body)


def test_typed_number_is_checked_before_it_counts() -> None:
    async def body(app: DDPAdvisorApp, pilot: Any, messages: list[Message]) -> None:
        from ddpadvisor.tui.messages import EditAnswer

        screen = app.diagnose_screen
        screen.post_message(EditAnswer("grad_accum_steps"))
        await pilot.pause()
        assert screen.prompt is not None and screen.prompt.type == "int"
        entry = screen.query_one("#q-input", Input)
        assert entry.has_focus
        await pilot.press("x", "-", "y", "enter")  # letters are not typed into a number
        await pilot.pause()
        assert entry.value == "-"
        assert "grad_accum_steps" not in app.session.answers
        assert "expects a whole number" in screen.query_one("#q-error").message  # type: ignore[attr-defined]
        entry.value = ""
        await pilot.press("8", "enter")
        await pilot.pause()
        assert app.session.answers["grad_accum_steps"].value == 8

    with_app(body)


def test_cancel_a_running_probe() -> None:
    hold = asyncio.Event()  # never set: the fake runs until cancelled
    fake = FakeRunner(observations=probe_runner().observations, hold=hold)

    async def body(app: DDPAdvisorApp, pilot: Any, messages: list[Message]) -> None:
        app.start_probes(("sampler",))
        await pilot.pause()
        assert isinstance(app.screen, RunScreen)
        assert of_type(messages, RunProgressed), "the first progress report arrives"
        assert app.screen.running
        await pilot.press("escape")  # cancel
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert fake.cancelled
        ended = of_type(messages, RunEnded)
        assert len(ended) == 1 and ended[0].cancelled
        assert not of_type(messages, RunFinished)
        assert app.session.measured == []
        assert isinstance(app.screen, RunScreen)  # the user reads "cancelled" first
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, DiagnoseScreen)

    with_app(body, probe_runner=fake)


def test_probe_offered_as_the_next_step_runs_that_probe() -> None:
    fake = probe_runner()

    async def body(app: DDPAdvisorApp, pilot: Any, messages: list[Message]) -> None:
        screen = app.diagnose_screen
        for _ in range(12):  # decline questions until a probe is the best next step
            prompt = screen.prompt
            assert prompt is not None
            if prompt.how == "probe":
                break
            # "don't know": its key, or from a typing box Tab to the choices and Enter
            await pilot.press(*(["0"] if prompt.choices else ["tab", "enter"]))
            await pilot.pause()
        prompt = screen.prompt
        assert prompt is not None and prompt.how == "probe" and prompt.probe
        await pilot.press("1")  # "Run probe '<name>' now"
        await run_settled(pilot)
        assert [r.probes for r in fake.calls] == [(prompt.probe,)]
        assert of_type(messages, RunFinished)

    with_app(body, probe_runner=fake)


# -- layout -----------------------------------------------------------------------------------------


def test_compact_layout_cycles_detail_panes() -> None:
    async def body(app: DDPAdvisorApp, pilot: Any, messages: list[Message]) -> None:
        screen = app.diagnose_screen
        assert screen.has_class("-compact")
        ranking, why = screen.query_one(RankingList), screen.query_one(WhyPanel)
        assert ranking.region.height > 0 and why.region.height == 0
        await pilot.press("v")
        await pilot.pause()
        assert ranking.region.height == 0 and why.region.height > 0
        await pilot.resize_terminal(*WIDE)
        await pilot.pause()
        assert not screen.has_class("-compact")
        assert ranking.region.height > 0 and why.region.height > 0

    with_app(body, size=SMALL)


def test_wide_layout_shows_ranking_why_and_advice_at_once() -> None:
    async def body(app: DDPAdvisorApp, pilot: Any, messages: list[Message]) -> None:
        screen = app.diagnose_screen
        await answer_shown(pilot, screen, "false")  # a first answer brings advice into play
        for selector in ("#question", "#ranking", "#why", "#claims", "#history"):
            region = screen.query_one(selector).region
            assert region.height > 2, selector
            assert screen.region.contains_region(region), selector

    with_app(body, size=WIDE)


def test_no_color_is_respected(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")

    async def body(app: DDPAdvisorApp, pilot: Any, messages: list[Message]) -> None:
        assert app.no_color
        assert any(type(f).__name__ in ("Monochrome", "NoColor") for f in app.get_line_filters())
        panel = app.diagnose_screen.query_one(QuestionPanel)
        assert panel.has_focus_within
        assert panel.styles.border_top[0] == "heavy"  # focus shown by shape, not colour

    with_app(body)


# -- evidence in and out ----------------------------------------------------------------------------


def test_export_json_and_load_it_again(tmp_path: Path) -> None:
    saved = tmp_path / "session.json"

    async def first(app: DDPAdvisorApp, pilot: Any, messages: list[Message]) -> None:
        screen = app.diagnose_screen
        for _ in range(3):
            prompt = screen.prompt
            assert prompt is not None
            await answer_shown(pilot, screen, prompt.choices[-1] if prompt.choices else "4")
        assert app.export(saved, "json") is None

    session = Session(fixture_engine())
    with_app(first, session=session)
    assert saved.read_text() == session.to_json()

    async def second(app: DDPAdvisorApp, pilot: Any, messages: list[Message]) -> None:
        assert isinstance(app.screen, EvidenceScreen)
        await pilot.press("6")  # an answers file or a saved session
        await pilot.pause()
        entry = app.screen.query_one("#evidence-path", Input)
        assert entry.has_focus
        entry.value = str(saved)
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, DiagnoseScreen)
        loaded = of_type(messages, EvidenceLoaded)
        assert [(m.kind, m.count) for m in loaded] == [("answers", 3)]
        assert list(app.session.answers) == sorted(session.answers)  # restored as answers
        assert ranking_of(app) == [(c.id, round(c.score, 6)) for c in session.current.causes]

    with_app(second, show_start=True)


def test_bad_path_is_reported_in_one_line(tmp_path: Path) -> None:
    broken = tmp_path / "answers.yaml"
    broken.write_text("no_such_fact: true\n")

    async def body(app: DDPAdvisorApp, pilot: Any, messages: list[Message]) -> None:
        await pilot.press("6")
        await pilot.pause()
        app.screen.query_one("#evidence-path", Input).value = str(broken)
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, EvidenceScreen)  # still there, to fix the path
        message = app.screen.query_one("#evidence-error").message  # type: ignore[attr-defined]
        assert "answers.yaml:1" in message and "no_such_fact" in message
        assert "\n" not in message
        assert not of_type(messages, EvidenceLoaded)

    with_app(body, show_start=True)


def test_trace_plots_redraw_on_resize(tmp_path: Path) -> None:
    session = Session(fixture_engine())
    session.trace_dirs.append(write_trace(tmp_path / "trace-demo"))

    async def body(app: DDPAdvisorApp, pilot: Any, messages: list[Message]) -> None:
        app.show_results(tab="plots")
        await pilot.pause()
        plot = app.screen.query_one("#plot-loss", RankPlot)
        first = str(plot.render())
        assert "rank 0" in first and "rank 1" in first
        assert MARKERS[0] in first and MARKERS[1] in first
        width = plot.content_size.width
        assert max(len(line) for line in first.splitlines()) <= width
        await pilot.resize_terminal(*SMALL)
        await pilot.pause()
        second = str(plot.render())
        assert plot.content_size.width < width
        assert max(len(line) for line in second.splitlines()) <= plot.content_size.width
        assert app.screen.query_one("#plot-scale", RankPlot).by_rank  # GradScaler scale

    with_app(body, session=session, size=WIDE)


# -- the command line -------------------------------------------------------------------------------


def test_cli_opens_the_tui_on_the_given_evidence(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from ddpadvisor.cli import main

    answers = tmp_path / "answers.yaml"
    answers.write_text("single_gpu_converges: true\n")
    opened: list[DDPAdvisorApp] = []

    def fake_run(self: DDPAdvisorApp, *args: Any, **kwargs: Any) -> None:
        opened.append(self)

    monkeypatch.setattr(DDPAdvisorApp, "run", fake_run)
    monkeypatch.setattr("ddpadvisor.cli.terminal_problem", lambda: None)  # pytest has no tty
    assert main(["--answers", str(answers), "--set", "loss_pattern=spikes", "--gpu", "no"]) == 0
    (app,) = opened
    assert not app.show_start  # evidence was given: straight to the questions
    assert app.session.gpu_available is False
    facts = {f.fact: (f.source, f.where) for f in app.session.current.facts}
    assert facts == {
        "single_gpu_converges": ("answer", "answers.yaml:1"),
        "loss_pattern": ("set", "--set"),
    }
    assert main([]) == 0 and opened[-1].show_start  # nothing given: the start screen


def test_cli_bad_evidence_fails_before_the_tui_starts(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from ddpadvisor.cli import main

    monkeypatch.setattr(DDPAdvisorApp, "run", lambda self, *a, **k: pytest.fail("UI started"))
    monkeypatch.setattr("ddpadvisor.cli.terminal_problem", lambda: None)
    assert main(["--answers", str(tmp_path / "missing.yaml")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ddpadvisor: error: ") and err.count("\n") == 1
    assert "missing.yaml" in err

"""Snapshots of the main screens at 80x24 (SSH) and 120x40, with the frozen fixture KB.

Baselines live in tests/__snapshots__/test_tui_snapshots/; regenerate them after an intended
change with ``pytest tests/test_tui_snapshots.py --snapshot-update`` and review the SVGs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_tui_support import fixture_engine, probe_runner, run_settled, write_trace
from textual.widgets import Input

from ddpadvisor.tui.app import DDPAdvisorApp, create_app
from ddpadvisor.tui.session import Session

SMALL = (80, 24)
WIDE = (120, 40)
ANSWERS = "single_gpu_converges: true\nloss_pattern: spikes\ngrad_accum_steps: 4\n"


def app_with(  # type: ignore[no-untyped-def]
    tmp_path: Path, *, answers: bool = True, trace: bool = False, lang: str = "en", **kwargs: Any
):
    session = Session(fixture_engine(), lang=lang)  # type: ignore[arg-type]
    if answers:
        path = tmp_path / "answers.yaml"
        path.write_text(ANSWERS)
        session.load("answers", path)
    if trace:
        session.trace_dirs.append(write_trace(tmp_path / "trace-demo"))
    return create_app(
        session=session,
        probe_runner=probe_runner(),
        trace_runner=probe_runner(),
        show_start=kwargs.pop("show_start", False),
    )


async def no_blink(pilot: Any) -> None:
    """A blinking cursor would make a screenshot depend on timing."""
    for entry in pilot.app.screen.query(Input):
        entry.cursor_blink = False


def test_start(snap_compare: Any, tmp_path: Path) -> None:
    app = app_with(tmp_path, answers=False, show_start=True)
    assert snap_compare(app, terminal_size=SMALL)


@pytest.mark.parametrize("size", [SMALL, WIDE], ids=["80x24", "120x40"])
def test_question_loop(snap_compare: Any, tmp_path: Path, size: tuple[int, int]) -> None:
    """After one answer typed in: question, ranking (and at 120x40 why, advice, evidence)."""
    assert snap_compare(app_with(tmp_path), press=["2"], terminal_size=size)


def test_question_loop_light_theme(snap_compare: Any, tmp_path: Path) -> None:
    async def light(pilot: Any) -> None:
        pilot.app.theme = "textual-light"

    assert snap_compare(app_with(tmp_path), press=["2"], terminal_size=WIDE, run_before=light)


def test_probe_run(snap_compare: Any, tmp_path: Path) -> None:
    async def run_probe(pilot: Any) -> None:
        app: DDPAdvisorApp = pilot.app
        await pilot.pause()
        app.start_probes(("sampler",))
        await run_settled(pilot)

    assert snap_compare(app_with(tmp_path), terminal_size=SMALL, run_before=run_probe)


@pytest.mark.parametrize("size", [SMALL, WIDE], ids=["80x24", "120x40"])
def test_results(snap_compare: Any, tmp_path: Path, size: tuple[int, int]) -> None:
    assert snap_compare(app_with(tmp_path), press=["2", "f"], terminal_size=size)


def test_fix(snap_compare: Any, tmp_path: Path) -> None:
    assert snap_compare(app_with(tmp_path), press=["2", "f", "x"], terminal_size=SMALL)


def test_advice(snap_compare: Any, tmp_path: Path) -> None:
    assert snap_compare(app_with(tmp_path), press=["2", "f", "a"], terminal_size=WIDE)


def test_plots(snap_compare: Any, tmp_path: Path) -> None:
    assert snap_compare(app_with(tmp_path, trace=True), press=["f", "p"], terminal_size=WIDE)


def test_export(snap_compare: Any, tmp_path: Path) -> None:
    async def open_export(pilot: Any) -> None:
        await pilot.pause()
        await pilot.press("e")
        await pilot.pause()
        await no_blink(pilot)

    assert snap_compare(app_with(tmp_path), terminal_size=SMALL, run_before=open_export)


# -- the same screens in Chinese (the fixture KB carries zh for every entry) ------------------------
@pytest.mark.parametrize("size", [SMALL, WIDE], ids=["80x24", "120x40"])
def test_start_zh(snap_compare: Any, tmp_path: Path, size: tuple[int, int]) -> None:
    app = app_with(tmp_path, answers=False, show_start=True, lang="zh")
    assert snap_compare(app, terminal_size=size)


@pytest.mark.parametrize("size", [SMALL, WIDE], ids=["80x24", "120x40"])
def test_question_loop_zh(snap_compare: Any, tmp_path: Path, size: tuple[int, int]) -> None:
    assert snap_compare(app_with(tmp_path, lang="zh"), press=["2"], terminal_size=size)


@pytest.mark.parametrize("size", [SMALL, WIDE], ids=["80x24", "120x40"])
def test_why_zh(snap_compare: Any, tmp_path: Path, size: tuple[int, int]) -> None:
    """At 80x24 the why pane is one `v` away; at 120x40 it is beside the ranking already."""

    async def answer_and_show_why(pilot: Any) -> None:
        await pilot.press("2")
        if size == SMALL:
            await pilot.press("v")
        pilot.app.clear_notifications()  # the "showing why" toast would depend on timing
        await pilot.pause()

    app = app_with(tmp_path, lang="zh")
    assert snap_compare(app, terminal_size=size, run_before=answer_and_show_why)


@pytest.mark.parametrize("size", [SMALL, WIDE], ids=["80x24", "120x40"])
def test_results_zh(snap_compare: Any, tmp_path: Path, size: tuple[int, int]) -> None:
    assert snap_compare(app_with(tmp_path, lang="zh"), press=["2", "f"], terminal_size=size)


@pytest.mark.parametrize("size", [SMALL, WIDE], ids=["80x24", "120x40"])
def test_advice_zh(snap_compare: Any, tmp_path: Path, size: tuple[int, int]) -> None:
    assert snap_compare(app_with(tmp_path, lang="zh"), press=["2", "f", "a"], terminal_size=size)


@pytest.mark.parametrize("size", [SMALL, WIDE], ids=["80x24", "120x40"])
def test_fix_zh(snap_compare: Any, tmp_path: Path, size: tuple[int, int]) -> None:
    assert snap_compare(app_with(tmp_path, lang="zh"), press=["2", "f", "x"], terminal_size=size)


def test_switched_to_zh(snap_compare: Any, tmp_path: Path) -> None:
    """Started in English, one answer, then `l`: the same session in Chinese."""
    assert snap_compare(app_with(tmp_path), press=["2", "l"], terminal_size=SMALL)

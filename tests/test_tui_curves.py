"""The curves of attached files in the TUI (issue 27, item 6): the describe screen reads the
files and folders named beside the description and draws their loss, one line per rank, the
reference run beside them, detected spikes and NaN/inf marked; a bad file is one line; the
start screen attaches a file or a folder as ``--attach`` does, and so does the command line.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from test_tui_small import SMALL, make_app, run
from test_tui_support import read_description
from textual.widgets import Input

from ddpadvisor.evidence.files.curve import Point, loss_pattern, spike_peaks
from ddpadvisor.evidence.sources import by_name
from ddpadvisor.tui.app import DDPAdvisorApp
from ddpadvisor.tui.curves import Line
from ddpadvisor.tui.screens.describe import DescribeScreen, paths_in
from ddpadvisor.tui.screens.evidence import CHOICES, EvidenceScreen
from ddpadvisor.tui.widgets.curves_plot import (
    NONFINITE,
    REFERENCE,
    SPIKE,
    CurvesPlot,
    CurvesView,
    plot_text,
)
from ddpadvisor.tui.widgets.rank_plot import MARKERS

FIXTURES = Path(__file__).resolve().parent / "attach_fixtures"
PER_RANK = "excerpts/per_rank_spike.log"  # two ranks; rank 1 spikes to 9.7 at step 140
REFERENCE_RUN = "made/correct.trainer_state.json"
NAN_RUN = "tensorboard/nan"  # an event-file folder whose loss turns NaN after step 59
LIGHTNING = "tensorboard/lightning_spikes/version_0"  # Lightning's TensorBoardLogger folder


@pytest.fixture
def in_fixtures(monkeypatch: pytest.MonkeyPatch) -> Path:
    """Relative names, so that what the screen shows is the same on every machine."""
    monkeypatch.chdir(FIXTURES)
    return FIXTURES


async def describe_files(pilot: Any, files: str, reference: str = "", text: str = "") -> Any:
    pilot.app.open_describe(text)
    await pilot.pause()
    screen = pilot.app.screen
    assert isinstance(screen, DescribeScreen)
    screen.query_one("#describe-files", Input).value = files
    screen.query_one("#describe-reference", Input).value = reference
    await read_description(pilot)
    await pilot.pause()
    return screen


def test_per_rank_lines_the_reference_and_a_spike(in_fixtures: Path) -> None:
    app = make_app()

    async def body(pilot: Any) -> None:
        screen = await describe_files(pilot, PER_RANK, REFERENCE_RUN)
        plot = screen.query_one(CurvesPlot)
        assert [(x.label, x.reference) for x in plot.lines] == [
            ("rank 0", False),
            ("rank 1", False),
            ("reference", True),
        ]
        rank0, rank1, ref = plot.lines
        assert rank0.steps == (1, 200) and rank1.file == "per_rank_spike.log"
        assert rank0.spikes == [] and rank1.spikes == [(140, 9.7)]
        assert ref.file == "correct.trainer_state.json" and not ref.spikes
        drawn = str(plot.render())
        assert drawn.count(SPIKE) == 2  # the legend's and the one on rank 1's line
        assert REFERENCE in drawn and "rank 1" in drawn
        caption = str(screen.query_one("#curves-caption").render())
        assert "rank 1: per_rank_spike.log, steps 1-200 · 1 spike(s) at step 140" in caption
        assert "reference: correct.trainer_state.json, steps 2-128" in caption
        # at 80x24 the curves scroll in their box inside the dialog, the facts list and the
        # footer's keys stay on screen
        view, box = screen.query_one(CurvesView), screen.query_one("#describe-box")
        assert view.max_scroll_y > 0
        assert box.content_region.contains_region(view.region)
        footer = {b.binding.key for b in screen.active_bindings.values()}
        assert {"ctrl+r", "ctrl+s", "escape"} <= footer
        # nothing counts until ctrl+s: then the files are attached, the reference after them
        assert not app.session.sources
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert [(s.kind, s.path.name) for s in app.session.sources] == [
            ("attach", "per_rank_spike.log"),
            ("reference", "correct.trainer_state.json"),
        ]
        assert app.session.attached == [PER_RANK]
        assert app.session.references == [REFERENCE_RUN]

    run(app, body)


def test_a_tensorboard_folder_with_nan_marks_the_steps(in_fixtures: Path) -> None:
    app = make_app()

    async def body(pilot: Any) -> None:
        screen = await describe_files(pilot, NAN_RUN)
        (line,) = screen.query_one(CurvesPlot).lines
        assert line.label == "nan" and line.file.startswith("nan/events.out.tfevents.")
        assert line.steps == (1, 59) and line.nonfinite[0] == 60
        assert NONFINITE in str(screen.query_one(CurvesPlot).render())
        await pilot.press("ctrl+s")
        await pilot.pause()
        facts = {f.fact: f for f in app.session.current.facts}
        assert facts["loss_pattern"].value == "nan" and facts["loss_pattern"].source == "log"

    run(app, body)


def test_spike_marks_are_the_spikes_the_loss_pattern_names() -> None:
    """The plot marks what the reader found, not a second opinion: the marked steps are the
    ones the loss pattern's detail lists."""
    got = by_name("attach").series(FIXTURES / "made" / "lightning_spikes.metrics.csv")  # type: ignore[misc]
    marked = [step for step, kind in got.marks["loss"][0] if kind == "spike"]
    from ddpadvisor.evidence.sources.attach import read_one

    (curve,) = read_one(FIXTURES / "made" / "lightning_spikes.metrics.csv").curves
    pattern = loss_pattern(curve)
    assert pattern is not None and pattern.value == "spikes"
    listed = pattern.detail.split("step(s) ")[1].split(";")[0].replace(" ...", "").split(", ")
    assert [str(s) for s in marked[: len(listed)]] == listed
    assert len(marked) == int(pattern.detail.split(" spike(s)")[0])
    # too short to say anything: no marks
    assert spike_peaks([Point(i, 1.0 + (9 if i == 5 else 0)) for i in range(10)]) == []


def test_a_narrow_plot_keeps_the_spike_it_marks() -> None:
    """Thinning 1000 points to a 30-column plot must not drop the one point a spike is."""
    flat = [(i, 1.0) for i in range(1000)]
    flat[501] = (501, 10.0)
    line = Line("rank 0", False, flat, "run.log", spikes=[(501, 10.0)])
    rows = plot_text([line], 30, 8).splitlines()
    top = next(i for i, row in enumerate(rows) if SPIKE in row)
    base = max(i for i, row in enumerate(rows) if MARKERS[0] in row)
    # the line climbs to the spike: its marker stands on a row between the base and the top
    assert any(MARKERS[0] in row for row in rows[top + 1 : base])


def test_bad_files_are_one_line_each_and_nothing_else_is_lost(
    in_fixtures: Path, tmp_path: Path
) -> None:
    binary = tmp_path / "model.bin"
    binary.write_bytes(b"\x00\x01\x1b[31m" * 1000)
    escape = tmp_path / "loss\x1b[2J.log"  # a control character in the name itself
    escape.write_text("\x1b]0;owned\x07 hello\n")
    empty_folder = tmp_path / "version_1"
    empty_folder.mkdir()
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    named = f"{PER_RANK} {binary} '{escape}' {empty_folder} {fifo} {tmp_path / 'missing.csv'}"
    app = make_app()

    async def body(pilot: Any) -> None:
        screen = await describe_files(pilot, named)
        view = screen.query_one(CurvesView)
        problems = view.curves.problems
        assert len(problems) == 5
        assert all("\n" not in p and "\x1b" not in p and "\x07" not in p for p in problems)
        assert "binary file" in problems[0] and "\\x1b[2J" in problems[1]
        assert "no TensorBoard event file" in problems[2]
        assert "not a regular file" in problems[3] and "no such file" in problems[4]
        assert "owned" not in " ".join(problems)  # the file's text is never shown
        assert len(view.curves.lines) == 2  # the good file is still drawn
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert [s.path.name for s in app.session.sources] == ["per_rank_spike.log"]

    run(app, body)


def test_the_start_screen_attaches_a_folder(in_fixtures: Path, tmp_path: Path) -> None:
    number = str(next(i for i, c in enumerate(CHOICES, start=1) if c.id == "attach"))
    app = make_app(show_start=True)

    async def body(pilot: Any) -> None:
        await pilot.press(number)
        await pilot.pause()
        entry = app.screen.query_one("#evidence-path", Input)
        entry.value = str(tmp_path)  # a folder with no event file in it
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, EvidenceScreen)  # still there, to fix the path
        message = app.screen.query_one("#evidence-error").message  # type: ignore[attr-defined]
        assert message.startswith(str(tmp_path)) and "no TensorBoard event file" in message
        assert "\n" not in message
        entry.value = LIGHTNING
        await pilot.press("enter")
        await pilot.pause()
        assert not isinstance(app.screen, EvidenceScreen)
        facts = {f.fact: f for f in app.session.current.facts}
        assert facts["loss_pattern"].value == "spikes"
        assert facts["loss_pattern"].where.startswith("version_0/events.out.tfevents.")
        # the results' plots tab draws the attached run's loss above the trace's plots
        app.show_results(tab="plots")
        await pilot.pause()
        (line,) = app.screen.query_one("#plots-attached", CurvesView).curves.lines
        assert line.label == "version_0" and len(line.spikes) >= 1

    run(app, body)


def test_a_csv_logger_folder_from_the_describe_screen(tmp_path: Path) -> None:
    """Lightning's CSVLogger leaves lightning_logs/version_N with metrics.csv (the file here
    was written by Lightning, tests/attach_fixtures/make_lightning.py) and hparams.yaml."""
    folder = tmp_path / "lightning_logs" / "version_0"
    folder.mkdir(parents=True)
    (folder / "metrics.csv").write_bytes(
        (FIXTURES / "made" / "lightning_spikes.metrics.csv").read_bytes()
    )
    (folder / "hparams.yaml").write_text("lr: 0.05\n")
    app = make_app()

    async def body(pilot: Any) -> None:
        screen = await describe_files(pilot, str(folder))
        (line,) = screen.query_one(CurvesPlot).lines
        assert (line.label, line.file, line.steps) == ("version_0", "metrics.csv", (0, 199))
        assert [s for s, _ in line.spikes] == [6, 60, 64, 130, 170, 172]
        await pilot.press("ctrl+s")
        await pilot.pause()
        facts = {f.fact: f for f in app.session.current.facts}
        assert facts["loss_pattern"].value == "spikes"

    run(app, body)


def test_the_command_line_attaches_for_the_tui(
    monkeypatch: pytest.MonkeyPatch, in_fixtures: Path
) -> None:
    """``ddpadvisor --attach`` without --json opens the TUI on the attached files (they were
    ignored before)."""
    from ddpadvisor.cli import main

    opened: list[DDPAdvisorApp] = []
    monkeypatch.setattr(DDPAdvisorApp, "run", lambda self, *a, **k: opened.append(self))
    monkeypatch.setattr("ddpadvisor.cli.terminal_problem", lambda: None)
    assert main(["--attach", NAN_RUN, "--reference-log", REFERENCE_RUN]) == 0
    (app,) = opened
    assert not app.show_start
    assert [s.kind for s in app.session.sources] == ["attach", "reference"]
    assert {f.fact: f.value for f in app.session.current.facts}["loss_pattern"] == "nan"


def test_the_command_line_refuses_a_bad_attachment_before_the_tui(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from ddpadvisor.cli import main

    monkeypatch.setattr(DDPAdvisorApp, "run", lambda self, *a, **k: pytest.fail("UI started"))
    monkeypatch.setattr("ddpadvisor.cli.terminal_problem", lambda: None)
    assert main(["--attach", str(tmp_path)]) == 2  # a folder with no event file in it
    err = capsys.readouterr().err
    assert err.startswith(f"ddpadvisor: error: {tmp_path}: a folder with no TensorBoard")
    assert err.count("\n") == 1


def test_a_log_pasted_in_the_text_is_drawn_and_attached(in_fixtures: Path) -> None:
    log = (in_fixtures / "excerpts" / "nanogpt_diverges.log").read_text()
    app = make_app()

    async def body(pilot: Any) -> None:
        screen = await describe_files(pilot, "", text="On 4 GPUs the loss climbs back:\n" + log)
        (line,) = screen.query_one(CurvesPlot).lines
        assert (line.label, line.file, line.steps) == ("your text", "pasted.txt", (0, 590))
        folder = screen.pasted
        assert folder is not None and folder.exists()
        await pilot.press("ctrl+s")
        await pilot.pause()
        got = {f.fact: f for f in app.session.current.facts}
        assert got["loss_pattern"].value == "diverges" and got["loss_pattern"].source == "log"
        assert got["loss_pattern"].where == "pasted.txt steps 0-590"
        assert got["world_size"].source == "answer"  # the words are still read as words
        assert not folder.exists()  # the private copy goes with the dialog

    run(app, body)


def test_a_sentence_with_one_loss_is_no_curve() -> None:
    app = make_app()

    async def body(pilot: Any) -> None:
        text = "step 100 loss 2.31 then it oscillates on 4 GPUs"
        screen = await describe_files(pilot, "", text=text)
        assert not screen.query_one(CurvesView).display
        assert not screen.curves.lines and not screen.curves.readable

    run(app, body)


def test_typed_and_pasted_paths() -> None:
    home = str(Path("~").expanduser())
    assert paths_in("a.log  'my run/metrics.csv' b\\ c.json") == [
        "a.log",
        "my run/metrics.csv",
        "b c.json",
    ]
    assert paths_in("csv:~/m.txt ~/x") == [f"csv:{home}/m.txt", f"{home}/x"]
    assert paths_in("'unbalanced x") == ["'unbalanced", "x"]


# -- snapshots at 80x24, English and Chinese ---------------------------------------------------


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_curves_snapshot(snap_compare: Any, lang: str, in_fixtures: Path) -> None:
    """Two ranks, one spike marked on rank 1, the reference beside them, at 80x24."""

    async def read(pilot: Any) -> None:
        await pilot.pause()
        await describe_files(pilot, PER_RANK, REFERENCE_RUN)

    assert snap_compare(make_app(lang), terminal_size=SMALL, run_before=read)

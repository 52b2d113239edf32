"""The loss curves read from the user's files: one line per rank (or file), the reference run
beside them, detected spikes and non-finite values marked, and under the plot where each line
came from and the steps it covers.

Drawn by plotext (as :mod:`ddpadvisor.tui.widgets.rank_plot`), without colour: every line has
its own marker character and a mark its own symbol, so the plot reads under NO_COLOR; the
characters are then coloured with theme variables.
"""

from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.content import Content, Span
from textual.widget import Widget
from textual.widgets import Static

from ddpadvisor.i18n import t
from ddpadvisor.tui.curves import Curves, Line
from ddpadvisor.tui.widgets.rank_plot import MARKERS, RANK_STYLES, _thin, blank_figure

REFERENCE = "·"
REFERENCE_STYLE = "$text-muted"
SPIKE = "!"
NONFINITE = "✗"
MARK_STYLE = "bold $text-error"
PLOT_ROWS = 9  # the legend and the plot (6 rows of it); the dialog fits it (describe.py)


def marker(lines: list[Line], line: Line) -> str:
    runs = [x for x in lines if not x.reference]
    return REFERENCE if line.reference else MARKERS[runs.index(line) % len(MARKERS)]


def style(lines: list[Line], line: Line) -> str:
    runs = [x for x in lines if not x.reference]
    return REFERENCE_STYLE if line.reference else RANK_STYLES[runs.index(line) % len(RANK_STYLES)]


def plot_text(lines: list[Line], width: int, height: int) -> str:
    fig = blank_figure(width, height)
    top = max(y for line in lines for _, y in line.points)
    # the reference first, so that the run's own lines are drawn over it
    for line in sorted(lines, key=lambda x: not x.reference):
        # thinned to what the width shows, the spikes kept: a spike is one point
        points = sorted({*_thin(line.points, max(2, width * 2)), *line.spikes})
        fig.draw(
            fig.signal(
                [p[0] for p in points], [p[1] for p in points], marker=marker(lines, line)
            ).lines()
        )
    for line in lines:
        if line.spikes:
            xs, ys = zip(*line.spikes)
            fig.draw(fig.signal(list(xs), list(ys), marker=SPIKE))
        if line.nonfinite:  # no value to draw: marked along the top edge at their steps
            steps = _thin([(s, top) for s in line.nonfinite], max(2, width))
            fig.draw(fig.signal([s for s, _ in steps], [top] * len(steps), marker=NONFINITE))
    # no axis label: the caption under the plot names each line's steps
    text: str = fig.build().string(colorless=True)
    return text.rstrip("\n")


def legend(lines: list[Line]) -> Content:
    parts: list[str | tuple[str, str]] = [(t("loss"), "bold")]
    for line in lines:
        parts += [(f" {marker(lines, line)} ", style(lines, line)), line.label]
    if any(line.spikes for line in lines):
        parts += [(f"  {SPIKE} ", MARK_STYLE), t("spike")]
    if any(line.nonfinite for line in lines):
        parts += [(f"  {NONFINITE} ", MARK_STYLE), t("NaN or inf")]
    return Content.assemble(*parts)


def colour(text: str, lines: list[Line]) -> Content:
    styles = {marker(lines, line): style(lines, line) for line in lines}
    styles[SPIKE] = styles[NONFINITE] = MARK_STYLE
    spans = [Span(i, i + 1, styles[ch]) for i, ch in enumerate(text) if ch in styles]
    return Content(text, spans)


def _steps(steps: list[int]) -> str:
    shown = ", ".join(str(s) for s in steps[:4])
    return shown + (" …" if len(steps) > 4 else "")


def caption(lines: list[Line]) -> list[Content]:
    """One line per plotted curve: its file, its steps and what was marked on it."""
    out = []
    for line in lines:
        first, last = line.steps
        parts: list[str | tuple[str, str]] = [
            (f"{marker(lines, line)} ", style(lines, line)),
            t(
                "{label}: {file}, steps {first}-{last}",
                label=line.label,
                file=line.file,
                first=first,
                last=last,
            ),
        ]
        if line.spikes:
            parts.append(
                (
                    t(
                        " · {n} spike(s) at step {steps}",
                        n=len(line.spikes),
                        steps=_steps([s for s, _ in line.spikes]),
                    ),
                    MARK_STYLE,
                )
            )
        if line.nonfinite:
            parts.append(
                (
                    t(
                        " · NaN or inf at {n} steps from step {step}",
                        n=len(line.nonfinite),
                        step=line.nonfinite[0],
                    ),
                    MARK_STYLE,
                )
            )
        out.append(Content.assemble(*parts))
    return out


class CurvesPlot(Widget):
    """``render`` reads the current size, so a resize redraws the plot."""

    DEFAULT_CSS = f"""
    CurvesPlot {{ height: {PLOT_ROWS}; }}
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.lines: list[Line] = []
        self._cache: tuple[tuple[int, int], Content] | None = None

    def show(self, lines: list[Line]) -> None:
        self.lines = lines
        self._cache = None
        self.refresh()

    def render(self) -> Content:
        if not self.lines:
            return Content("")
        width, height = self.content_size.width, self.content_size.height
        head = legend(self.lines)
        if width < 20 or height < 5:
            return Content("\n").join([head, Content.styled(t("too small to draw"), "$text-muted")])
        key = (width, height)
        if self._cache is None or self._cache[0] != key:
            body = colour(plot_text(self.lines, width, height - 1), self.lines)
            self._cache = (key, Content("\n").join([head, body]))
        return self._cache[1]


class CurvesView(VerticalScroll):
    """The plot, the caption under it, and one line for each file that was not read. It
    scrolls in its own box when the dialog leaves it less room than it needs."""

    DEFAULT_CSS = """
    CurvesView { height: auto; scrollbar-size-vertical: 1; }
    CurvesView > #curves-caption { height: auto; }
    CurvesView > #curves-problems { height: auto; }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.curves = Curves()

    def compose(self) -> ComposeResult:
        yield Static(id="curves-problems", classes="error")
        yield CurvesPlot(id="curves-plot")
        yield Static(id="curves-caption")

    def show(self, curves: Curves) -> None:
        self.curves = curves
        plot = self.query_one(CurvesPlot)
        plot.show(curves.lines)
        plot.display = bool(curves.lines)
        notes = [Content.styled(n, "$text-muted") for n in curves.notes]
        self.query_one("#curves-caption", Static).update(
            Content("\n").join([*caption(curves.lines), *notes])
        )
        problems = self.query_one("#curves-problems", Static)
        problems.update(Content("\n").join(Content(p) for p in curves.problems))
        problems.display = bool(curves.problems)
        self.display = bool(curves.lines or curves.notes or curves.problems)

    def needed(self) -> int:
        """The rows it takes without scrolling."""
        if not self.display:
            return 0
        plot = PLOT_ROWS if self.query_one(CurvesPlot).display else 0
        curves = self.curves
        return plot + len(curves.lines) + len(curves.notes) + len(curves.problems)

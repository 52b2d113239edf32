"""Per-rank plots of a trace: loss, GradScaler scale and gradient norm."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from textual import events
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.content import Content
from textual.widgets import Static

from ddpadvisor.i18n import t
from ddpadvisor.tui.curves import Curves
from ddpadvisor.tui.trace_series import read_series
from ddpadvisor.tui.widgets.curves_plot import CurvesView
from ddpadvisor.tui.widgets.rank_plot import RankPlot

PLOTS = (("loss", "loss per rank"), ("scale", "GradScaler scale"), ("grad_norm", "grad norm"))


class PlotsPanel(VerticalScroll):
    DEFAULT_CLASSES = "panel"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.border_title = t("Per-rank plots")
        self.folder: Path | None = None

    def compose(self) -> ComposeResult:
        yield CurvesView(id="plots-attached")
        yield Static(id="plots-note", classes="muted")
        for name, title in PLOTS:
            yield RankPlot(t(title), id=f"plot-{name}")

    def on_resize(self, event: events.Resize) -> None:
        self._share_height()

    def _share_height(self) -> None:
        """Split the visible height between the plots, scrolling below 10 rows each: fr units
        inside a scrolling container would give each plot the whole height."""
        shown = [p for p in self.query(RankPlot) if p.display]
        if not shown:
            return
        room = self.scrollable_content_region.height - 1  # the note line
        each = max(10, room // len(shown))
        for plot in shown:
            plot.styles.height = each

    def show(self, trace_dirs: list[Path], attached: Curves | None = None) -> None:
        """The trace's per-rank plots, below the loss of the attached files (if any)."""
        self.border_title = t("Per-rank plots")
        self.query_one("#plots-attached", CurvesView).show(attached or Curves())
        for name, title in PLOTS:
            self.query_one(f"#plot-{name}", RankPlot).set_title(t(title))
        note = self.query_one("#plots-note", Static)
        plots = {name: self.query_one(f"#plot-{name}", RankPlot) for name, _ in PLOTS}
        if not trace_dirs:
            note.update(
                Content(
                    t(
                        "No trace loaded. Trace your script (t on the question screen, or "
                        "'ddpadvisor trace --out DIR -- train.py'), then load the folder with o."
                    )
                )
            )
            for plot in plots.values():
                plot.display = False
            return
        self.folder = trace_dirs[-1]
        series = read_series(self.folder)
        skipped = (
            t(" · {n} unreadable lines skipped", n=series.skipped_lines)
            if series.skipped_lines
            else ""
        )
        note.update(
            Content(
                t(
                    "trace {name}: {ranks} ranks{skipped}",
                    name=self.folder.name,
                    ranks=len(series.ranks()),
                    skipped=skipped,
                )
            )
        )
        for name, plot in plots.items():
            by_rank = series.series.get(name, {})
            plot.display = bool(by_rank) or name == "loss"
            plot.show(by_rank)
        self._share_height()

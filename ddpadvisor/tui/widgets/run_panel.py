"""Progress of a probe or trace run, then its per-rank result table and what it measured."""

from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.content import Content
from textual.widgets import DataTable, ProgressBar, Static

from ddpadvisor.i18n import t
from ddpadvisor.tui.runners import RankRow, RunOutcome, RunProgress, RunRequest
from ddpadvisor.tui.session import format_value, show_value

OK_LABEL = {True: ("ok", "bold $text-success"), False: ("MISMATCH", "bold $text-error")}


def _cells(s: str) -> int:
    from rich.cells import cell_len

    return cell_len(s)


def row_cells(row: RankRow) -> tuple[str, str, Content]:
    if row.ok is None:
        return row.rank, row.item, Content(row.value)
    label, style = OK_LABEL[row.ok]
    return row.rank, row.item, Content.assemble((t(label), style), f"  {row.value}")


def _width(cell: str | Content) -> int:
    return cell.cell_length if isinstance(cell, Content) else _cells(cell)


class RunPanel(Vertical):
    DEFAULT_CLASSES = "panel"

    def __init__(self, request: RunRequest, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.request = request
        self.border_title = request.describe()
        self.lines_seen = 0

    def compose(self) -> ComposeResult:
        yield ProgressBar(total=None, show_eta=False, id="run-progress")
        yield Static(t("starting…"), id="run-line", classes="muted")
        yield Static(id="run-status")
        yield DataTable(id="run-table", zebra_stripes=True, cursor_type="row")

    def progress(self, step: RunProgress) -> None:
        self.lines_seen += 1
        bar = self.query_one("#run-progress", ProgressBar)
        if step.total:
            bar.update(total=step.total, progress=step.done)
        self.query_one("#run-line", Static).update(Content(step.text))

    def finished(self, outcome: RunOutcome) -> None:
        bar = self.query_one("#run-progress", ProgressBar)
        bar.update(total=bar.total or 1, progress=bar.total or 1)
        facts = outcome.gathered.observations
        state = (
            (t("failed"), "bold $text-error")
            if outcome.failed
            else (t("done"), "bold $text-success")
        )
        measured = ", ".join(f"{o.fact}={show_value(o.value)}" for o in facts) or t("no facts")
        self.query_one("#run-status", Static).update(
            Content.assemble(state, t(" · measured {n}: {facts}", n=len(facts), facts=measured))
        )
        self.query_one("#run-line", Static).update(Content(outcome.message))
        table: DataTable[Any] = self.query_one("#run-table", DataTable)
        table.clear(columns=True)
        rows = outcome.rows or [
            RankRow(o.where or "-", o.fact, format_value(o.value)) for o in facts
        ]
        cells = [row_cells(row) for row in rows]
        # Widths from the data: styled cells are not measured when a column is sized.
        for index, label in enumerate(t(x) for x in ("rank", "check", "result")):
            width = max([_cells(label), *(_width(c[index]) for c in cells)])
            table.add_column(label, width=min(width, 60))
        for row_cells_ in cells:
            table.add_row(*row_cells_)

    def ended(self, cancelled: bool, error: str) -> None:
        text = (
            (t("cancelled"), "bold $text-warning")
            if cancelled
            else (t("crashed: ") + error, "bold $text-error")
        )
        self.query_one("#run-status", Static).update(
            Content.assemble(text, t(" · nothing was added to the evidence"))
        )

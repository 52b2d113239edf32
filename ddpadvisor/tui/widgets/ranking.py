"""The live ranking of causes as bars; the highlighted cause drives the "why" panel."""

from __future__ import annotations

import contextlib
from typing import Any

from rich.cells import cell_len
from textual import events, on
from textual.content import Content
from textual.widgets import OptionList
from textual.widgets.option_list import Option, OptionDoesNotExist

from ddpadvisor.i18n import t
from ddpadvisor.report.models import CauseOut, Diagnosis
from ddpadvisor.tui.messages import CauseHighlighted

FULL, EMPTY = "█", "░"


def bar(score: float, width: int) -> tuple[str, str]:
    """Filled and empty parts; the filled length carries the score without colour (NO_COLOR)."""
    filled = max(0, min(width, round(score * width)))
    return FULL * filled, EMPTY * (width - filled)


def cause_line(cause: CauseOut, width: int, *, top: bool, name_width: int = 40) -> Content:
    # Rank, bar, percentage and the longest name share the width; the bar takes what is left.
    bar_width = max(6, min(24, width - name_width - 9))
    filled, empty = bar(cause.score, bar_width)
    style = "bold $text-success" if top else "$text-primary"
    name = _name(cause)
    line = Content.assemble(
        (f"{cause.rank:>2} ", "$text-muted"),
        (filled, style),
        (empty, "$text-muted"),
        (f" {cause.score:>4.0%} ", "bold" if top else ""),
        name,
    )
    return line.truncate(max(10, width), ellipsis=True)


def _name(cause: CauseOut) -> str:
    return cause.id if not cause.catch_all else cause.id + t(" (no catalogued fault)")


class RankingList(OptionList):
    """One option per cause, id = cause id; keeps the highlighted cause across re-rankings."""

    DEFAULT_CLASSES = "panel"

    def __init__(self, *, limit: int | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.limit = limit
        self.diagnosis: Diagnosis | None = None
        self.relabel()

    def relabel(self) -> None:
        self.border_title = t("Causes, most likely first")

    def show(self, diagnosis: Diagnosis) -> None:
        self.relabel()
        # Follow the top while the user looks at it; keep a cause they picked themselves.
        keep = None if self.highlighted in (None, 0) else self.selected_cause
        self.diagnosis = diagnosis
        self._rebuild(keep)

    @property
    def selected_cause(self) -> str | None:
        option = self.highlighted_option
        return option.id if option is not None else None

    def select_cause(self, cause_id: str) -> None:
        with contextlib.suppress(OptionDoesNotExist):
            self.highlighted = self.get_option_index(cause_id)

    def _rebuild(self, keep: str | None) -> None:
        if self.diagnosis is None:
            return
        causes = self.diagnosis.causes[: self.limit] if self.limit else self.diagnosis.causes
        width = self.scrollable_content_region.width or 60
        longest = max((cell_len(_name(c)) for c in causes), default=20)
        self.set_options(
            Option(cause_line(c, width, top=c.rank == 1, name_width=longest), id=c.id)
            for c in causes
        )
        ids = [c.id for c in causes]
        self.highlighted = ids.index(keep) if keep in ids else 0

    def on_resize(self, event: events.Resize) -> None:
        self._rebuild(self.selected_cause)

    @on(OptionList.OptionHighlighted)
    def _highlighted(self, event: OptionList.OptionHighlighted) -> None:
        event.stop()
        if event.option_id:
            self.post_message(CauseHighlighted(event.option_id))

"""One line at the top: the leading cause, how much evidence there is, and whether it settled."""

from __future__ import annotations

from typing import Any

from textual import events
from textual.content import Content
from textual.widgets import Static

from ddpadvisor.i18n import t
from ddpadvisor.report.models import Diagnosis


def summary_content(diagnosis: Diagnosis, answered: int, width: int = 0) -> Content:
    """The line; when it would not fit ``width`` cells, the count of answers given here is
    dropped so the state (asking/settled) stays visible."""
    full = _line(diagnosis, answered, short=False)
    if width and full.cell_length > width:
        return _line(diagnosis, answered, short=True)
    return full


def _line(diagnosis: Diagnosis, answered: int, *, short: bool) -> Content:
    lead = diagnosis.causes[0]
    state = (
        (t("settled"), "bold $text-success") if diagnosis.done else (t("asking"), "$text-warning")
    )
    warnings = t(" · {n} warnings", n=len(diagnosis.warnings)) if diagnosis.warnings else ""
    counts = (
        t("· {facts} facts · ", facts=len(diagnosis.facts))
        if short
        else t(
            "· {facts} facts, {answered} answered here · ",
            facts=len(diagnosis.facts),
            answered=answered,
        )
    )
    return Content.assemble(
        ("ddpadvisor ", "bold $text-accent"),
        (t("· most likely "), "$text-muted"),
        (lead.id, "bold"),
        f" {lead.score:.0%} ",
        (counts, "$text-muted"),
        state,
        (warnings, "$text-warning"),
    )


class SummaryBar(Static):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._shown: tuple[Diagnosis, int] | None = None

    def show(self, diagnosis: Diagnosis, answered: int) -> None:
        self._shown = (diagnosis, answered)
        self.update(summary_content(diagnosis, answered, self.content_size.width))

    def on_resize(self, event: events.Resize) -> None:
        if self._shown is not None:
            self.show(*self._shown)

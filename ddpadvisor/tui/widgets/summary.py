"""One line at the top: the leading cause, how much evidence there is, and whether it settled."""

from __future__ import annotations

from textual.content import Content
from textual.widgets import Static

from ddpadvisor.report.models import Diagnosis


def summary_content(diagnosis: Diagnosis, answered: int) -> Content:
    lead = diagnosis.causes[0]
    state = ("settled", "bold $text-success") if diagnosis.done else ("asking", "$text-warning")
    return Content.assemble(
        ("ddpadvisor ", "bold $text-accent"),
        ("· most likely ", "$text-muted"),
        (lead.id, "bold"),
        f" {lead.score:.0%} ",
        (f"· {len(diagnosis.facts)} facts, {answered} answered here · ", "$text-muted"),
        state,
        (f" · {len(diagnosis.warnings)} warnings" if diagnosis.warnings else "", "$text-warning"),
    )


class SummaryBar(Static):
    def show(self, diagnosis: Diagnosis, answered: int) -> None:
        self.update(summary_content(diagnosis, answered))

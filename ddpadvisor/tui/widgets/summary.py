"""One line at the top: the leading cause, how much evidence there is, and whether it settled."""

from __future__ import annotations

from textual.content import Content
from textual.widgets import Static

from ddpadvisor.i18n import t
from ddpadvisor.report.models import Diagnosis


def summary_content(diagnosis: Diagnosis, answered: int) -> Content:
    lead = diagnosis.causes[0]
    state = (
        (t("settled"), "bold $text-success") if diagnosis.done else (t("asking"), "$text-warning")
    )
    warnings = t(" · {n} warnings", n=len(diagnosis.warnings)) if diagnosis.warnings else ""
    return Content.assemble(
        ("ddpadvisor ", "bold $text-accent"),
        (t("· most likely "), "$text-muted"),
        (lead.id, "bold"),
        f" {lead.score:.0%} ",
        (
            t(
                "· {facts} facts, {answered} answered here · ",
                facts=len(diagnosis.facts),
                answered=answered,
            ),
            "$text-muted",
        ),
        state,
        (warnings, "$text-warning"),
    )


class SummaryBar(Static):
    def show(self, diagnosis: Diagnosis, answered: int) -> None:
        self.update(summary_content(diagnosis, answered))

"""Forum advice the current evidence refutes, confirms or rules out."""

from __future__ import annotations

from typing import Any

from textual import events
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.content import Content
from textual.widgets import Static

from ddpadvisor.i18n import current, t
from ddpadvisor.report.models import ClaimOut
from ddpadvisor.tui.layout_text import hang, pad

STANCE_STYLE = {
    "refuted": "bold $text-error",
    "confirmed": "bold $text-success",
    "ruled-out": "$text-warning",
}
STANCE_LABEL = {"refuted": "REFUTED", "confirmed": "CONFIRMED", "ruled-out": "RULED OUT"}


def claim_content(claim: ClaimOut, *, detailed: bool, width: int = 0) -> Content:
    # Columns in cells, wide enough for the longest label in either language.
    head = Content.assemble(
        (pad(t(STANCE_LABEL[claim.stance]), 9) + " ", STANCE_STYLE[claim.stance]),
        (pad(t(claim.verdict), 14) + " ", "$text-muted"),
    )
    parts: list[str | tuple[str, str]] = [
        claim.text,
        (f"  [{', '.join(claim.provenance)}]", "$text-muted"),
    ]
    if detailed:
        parts.append(("\n" + " ".join(claim.reason.split()), ""))
        parts.append(("\n" + claim.why_here, "$text-muted"))
        if claim.experiment:
            parts.append(("\n" + t("Shown by: ") + claim.experiment, "$text-muted"))
    paragraphs = Content.assemble(*parts).split("\n")
    blank = Content(" " * head.cell_length)
    return Content("\n").join(
        hang(head if i == 0 else blank, line, width) for i, line in enumerate(paragraphs)
    )


def count_line(claims: list[ClaimOut]) -> str:
    counts = {s: sum(c.stance == s for c in claims) for s in STANCE_LABEL}
    shown = [t("{n} " + s, n=n) for s, n in counts.items() if n]
    return t(", ").join(shown) if shown else t("none bears on this evidence yet")


class ClaimsPanel(VerticalScroll):
    """Refuted advice first (the engine orders harmful and myth before the rest)."""

    DEFAULT_CLASSES = "panel"

    def __init__(self, *, detailed: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.detailed = detailed
        self.border_title = t("Forum advice")
        self.claims: list[ClaimOut] = []
        self.lang = ""

    def compose(self) -> ComposeResult:
        yield Static(id="claims-body")

    def show(self, claims: list[ClaimOut]) -> None:
        if claims == self.claims and self.lang == current():
            return  # unchanged: re-wrapping dozens of claims on every answer is the slow part
        self.claims, self.lang = claims, current()
        self.border_title = t("Forum advice: {counts}", counts=count_line(claims))
        self._render_body()

    def on_resize(self, event: events.Resize) -> None:
        self._render_body()

    def _render_body(self) -> None:
        claims = self.claims
        body = self.query_one("#claims-body", Static)
        if not claims:
            body.update(
                Content.styled(
                    t(
                        "No forum advice bears on the evidence so far. "
                        "Answer a few questions, or see every claim with 'ddpadvisor claims'."
                    ),
                    "$text-muted",
                )
            )
            return
        sep = Content("\n\n") if self.detailed else Content("\n")
        width = self.scrollable_content_region.width
        body.update(sep.join(claim_content(c, detailed=self.detailed, width=width) for c in claims))

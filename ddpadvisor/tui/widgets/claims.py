"""Forum advice the current evidence refutes, confirms or rules out."""

from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.content import Content
from textual.widgets import Static

from ddpadvisor.report.models import ClaimOut

STANCE_STYLE = {"refuted": "bold $error", "confirmed": "bold $success", "ruled-out": "$warning"}
STANCE_LABEL = {"refuted": "REFUTED", "confirmed": "CONFIRMED", "ruled-out": "RULED OUT"}


def claim_content(claim: ClaimOut, *, detailed: bool) -> Content:
    parts: list[str | tuple[str, str]] = [
        (f"{STANCE_LABEL[claim.stance]:<9} ", STANCE_STYLE[claim.stance]),
        (f"{claim.verdict:<14} ", "$text-muted"),
        claim.text,
        (f"  [{', '.join(claim.provenance)}]", "$text-muted"),
    ]
    if detailed:
        parts.append(("\n          " + " ".join(claim.reason.split()), ""))
        parts.append(("\n          " + claim.why_here, "$text-muted"))
        if claim.experiment:
            parts.append(("\n          Try: " + claim.experiment, "$text-muted"))
    return Content.assemble(*parts)


def count_line(claims: list[ClaimOut]) -> str:
    counts = {s: sum(c.stance == s for c in claims) for s in STANCE_LABEL}
    shown = [f"{n} {s}" for s, n in counts.items() if n]
    return ", ".join(shown) if shown else "none bears on this evidence yet"


class ClaimsPanel(VerticalScroll):
    """Refuted advice first (the engine orders harmful and myth before the rest)."""

    DEFAULT_CLASSES = "panel"

    def __init__(self, *, detailed: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.detailed = detailed
        self.border_title = "Forum advice"
        self.claims: list[ClaimOut] = []

    def compose(self) -> ComposeResult:
        yield Static(id="claims-body")

    def show(self, claims: list[ClaimOut]) -> None:
        self.claims = claims
        self.border_title = f"Forum advice: {count_line(claims)}"
        body = self.query_one("#claims-body", Static)
        if not claims:
            body.update(
                Content.styled(
                    "No forum advice bears on the evidence so far. "
                    "Answer a few questions, or see every claim with 'ddpadvisor claims'.",
                    "$text-muted",
                )
            )
            return
        sep = Content("\n\n") if self.detailed else Content("\n")
        body.update(sep.join(claim_content(c, detailed=self.detailed) for c in claims))

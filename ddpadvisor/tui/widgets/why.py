"""Why the selected cause stands where it does: its prior, and the observations that moved it."""

from __future__ import annotations

from typing import Any

from textual import events
from textual.containers import VerticalScroll
from textual.content import Content
from textual.widgets import Static

from ddpadvisor.i18n import t
from ddpadvisor.report.models import CauseOut, EvidenceItem
from ddpadvisor.tui.layout_text import hang, paragraph
from ddpadvisor.tui.session import show_value


def evidence_line(ev: EvidenceItem, width: int = 0) -> Content:
    up = ev.direction == "for"
    where = f" · {ev.where}" if ev.where else ""
    via = ""
    if len(ev.path) == 3:  # cause, mechanism, finding
        via = f" · {t('via')} {ev.path[1].split(':', 1)[-1]}"
    head = Content.assemble(
        ("▲ " if up else "▼ ", "bold $text-success" if up else "bold $text-error"),
        (f"{ev.size:+.1f} ", "bold"),
    )
    body = Content.assemble(
        f"{ev.fact} = {show_value(ev.value)}",
        (f"  {t(ev.source)}{where}{via}", "$text-muted"),
    )
    lines = [hang(head, body, width)]
    if ev.detail:
        lines.append(
            hang(Content(" " * head.cell_length), Content.styled(ev.detail, "$text-muted"), width)
        )
    return Content("\n").join(lines)


def explain(cause: CauseOut, *, mechanism: bool = True, width: int = 0) -> Content:
    head = Content.assemble(
        (f"#{cause.rank} {cause.id}", "bold"),
        f"  {cause.score:.0%}",
        (t("  (prior {prior})", prior=f"{cause.prior:.0%}"), "$text-muted"),
    )
    lines: list[Content] = [head, paragraph(cause.title, width)]
    if cause.mode is not None:
        way = t("in this way: {mode}", mode=cause.mode.title)
        lines.append(paragraph(Content.styled(way, "$text-muted"), width))
    if cause.evidence:
        lines.append(Content.styled(t("Moved by (log10 likelihood ratio):"), "bold"))
        lines.extend(evidence_line(ev, width) for ev in cause.evidence)
    else:
        lines.append(
            Content.styled(
                t(
                    "No observation bears on it yet: it stands on its prior and on what moved "
                    "the others."
                ),
                "$text-muted",
            )
        )
    if mechanism and cause.mechanism:
        lines.append(Content(""))
        lines.append(Content.styled(t("Mechanism"), "bold"))
        lines.append(paragraph(" ".join(cause.mechanism.split()), width))
    return Content("\n").join(lines)


class WhyPanel(VerticalScroll):
    DEFAULT_CLASSES = "panel"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.border_title = t("Why")
        self._body = Static(id="why-body")
        self.cause: CauseOut | None = None

    def compose(self):  # type: ignore[no-untyped-def]
        yield self._body

    def show(self, cause: CauseOut | None) -> None:
        self.cause = cause
        if cause is None:
            self.border_title = t("Why")
            self._body.update("")
            return
        self.border_title = t("Why {cause}", cause=cause.id)
        self._body.update(explain(cause, width=self.scrollable_content_region.width))
        self.scroll_home(animate=False)

    def on_resize(self, event: events.Resize) -> None:
        if self.cause is not None:
            self._body.update(explain(self.cause, width=self.scrollable_content_region.width))

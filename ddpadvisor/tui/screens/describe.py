"""Describe the problem: the user's own words (or a pasted forum post) read for facts.

Two steps in one dialog: type or paste the text and press ctrl+r to read it; then every fact
found is listed with the phrase it came from, and below them the causes the text reads like
with the words they share, all ticked. The user unticks what is wrong and presses ctrl+s: only
the confirmed lines count, the facts as answers the history can still change.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, cast

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Footer, SelectionList, Static, TextArea

from ddpadvisor.evidence.intake import Finding, described, extract
from ddpadvisor.i18n import t
from ddpadvisor.kb.resemblance import Resemblance
from ddpadvisor.tui.session import format_value

if TYPE_CHECKING:
    from ddpadvisor.tui.app import DDPAdvisorApp

INTRO = (
    "Describe the problem in your own words, or paste your forum post (English or 中文): "
    "GPUs, batch, precision, what the loss does, and your training loop if you can: code is "
    "scanned. ctrl+r reads it."
)


def finding_label(f: Finding) -> Content:
    return Content.assemble(
        (f"{f.fact} = {format_value(f.value)}", "bold"),
        "  \u2190 ",
        ("code ", "italic") if f.origin == "code" else "",
        f"\u201c{f.phrase}\u201d",
    )


SHOWN_RESEMBLANCE = 3  # causes the text reads like, offered below its facts


def resemblance_label(r: Resemblance) -> Content:
    return Content.assemble(
        (t("reads like {cause}", cause=r.cause), "bold"),
        f" ({r.score:.2f})  \u2190 ",
        ", ".join(r.words),
    )


class DescribeScreen(ModalScreen[int | None]):
    """Dismisses with the number of confirmed facts, or None when cancelled."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+r", "read", "Read it"),
        Binding("ctrl+s", "confirm", "Use ticked facts"),
        Binding("escape", "close", "Back"),
    ]

    def __init__(self, text: str = "") -> None:
        super().__init__()
        self.initial = text
        self.findings: list[Finding] = []
        self.resemblance: list[Resemblance] = []

    @property
    def advisor(self) -> DDPAdvisorApp:
        return cast("DDPAdvisorApp", self.app)

    def compose(self) -> ComposeResult:
        with Vertical(id="describe-box", classes="panel dialog"):
            yield Static(Content(t(INTRO)), id="describe-intro")
            yield TextArea(self.initial, id="describe-text", soft_wrap=True)
            yield Static("", id="describe-status")
            yield SelectionList[int](id="describe-found")
        yield Footer(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        self.query_one("#describe-box").border_title = t("Describe the problem")
        self.query_one("#describe-found", SelectionList).display = False
        text = self.query_one("#describe-text", TextArea)
        text.cursor_blink = False
        text.focus()

    def action_read(self) -> None:
        text = self.query_one("#describe-text", TextArea).text
        kb = self.advisor.session.engine.kb
        self.findings = extract(kb, text)
        self.resemblance = described(kb, [text])[:SHOWN_RESEMBLANCE]
        found = self.query_one("#describe-found", SelectionList)
        found.clear_options()
        status = self.query_one("#describe-status", Static)
        if not self.findings and not self.resemblance:
            status.update(t("Nothing recognised. Add details, or Esc to answer questions instead."))
            found.display = False
            return
        n = len(self.findings)
        found.add_options([(finding_label(f), i, True) for i, f in enumerate(self.findings)])
        found.add_options(
            [(resemblance_label(r), n + i, True) for i, r in enumerate(self.resemblance)]
        )
        found.display = True
        status.update(
            t(
                "Found {n} facts. Untick any that are wrong (space), then ctrl+s to use the rest.",
                n=len(self.findings),
            )
        )
        found.focus()

    def confirmed(self) -> list[Finding]:
        found = self.query_one("#describe-found", SelectionList)
        return [self.findings[i] for i in found.selected if i < len(self.findings)]

    def confirmed_resemblance(self) -> list[Resemblance]:
        found = self.query_one("#describe-found", SelectionList)
        n = len(self.findings)
        return [self.resemblance[i - n] for i in found.selected if i >= n]

    def action_confirm(self) -> None:
        if not self.findings and not self.resemblance:
            self.action_read()
            return
        chosen = self.confirmed()
        self.advisor.session.answer_described(chosen, self.confirmed_resemblance())
        self.advisor.changed("description read")
        self.dismiss(len(chosen))

    def action_close(self) -> None:
        self.dismiss(None)

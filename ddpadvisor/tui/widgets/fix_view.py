"""One fix in full: its steps, the code before and after, and the command that verifies it."""

from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.content import Content
from textual.widgets import Static

from ddpadvisor.i18n import t
from ddpadvisor.report.models import FixOut
from ddpadvisor.tui.widgets.paragraph import Paragraph


class FixView(VerticalScroll):
    DEFAULT_CLASSES = "panel"

    def __init__(self, cause_id: str, fix: FixOut, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.cause_id = cause_id
        self.fix = fix
        self.border_title = t("Fix for {cause}", cause=cause_id)

    def compose(self) -> ComposeResult:
        fix = self.fix
        yield Paragraph(Content.styled(fix.title, "bold"), id="fix-title")
        steps = "\n".join(f"{i}. {s}" for i, s in enumerate(fix.steps, start=1))
        yield Paragraph(Content(steps), id="fix-steps")
        if fix.code is not None:
            if fix.code.before:
                yield Static(Content.styled(t("Before"), "bold $text-error"), classes="label")
                yield Static(Content(fix.code.before.rstrip()), classes="code")
            yield Static(Content.styled(t("After"), "bold $text-success"), classes="label")
            yield Static(Content(fix.code.after.rstrip()), classes="code", id="fix-after")
        yield Static(Content.styled(t("Verify (c copies the command)"), "bold"), classes="label")
        yield Static(Content(fix.verify.command), classes="code", id="fix-verify")
        yield Paragraph(
            Content.assemble((t("Expect: "), "bold"), fix.verify.expect), id="fix-expect"
        )

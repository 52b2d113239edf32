"""A fix in full; `c` copies its verify command (OSC 52, so it works over SSH too)."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import ModalScreen
from textual.widgets import Footer

from ddpadvisor.i18n import t
from ddpadvisor.report.models import FixOut
from ddpadvisor.tui.controller import Controller
from ddpadvisor.tui.messages import VerifyReported
from ddpadvisor.tui.widgets.fix_view import FixView


class FixScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("c", "copy_verify", "Copy verify command"),
        Binding("y", "copy_code", "Copy code"),
        Binding("n", "verified('failed')", "Verify failed"),
        Binding("w", "verified('passed')", "Verify passed", show=False),
        Binding("escape", "dismiss", "Close"),
    ]

    def __init__(self, controller: Controller, cause_id: str, fix: FixOut) -> None:
        super().__init__()
        self.controller = controller
        self.cause_id = cause_id
        self.fix = fix

    def compose(self) -> ComposeResult:
        yield FixView(self.cause_id, self.fix, id="fix-view", classes="panel dialog")
        yield Footer(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        self.controller.localise(self)

    def action_copy_verify(self) -> None:
        self.app.copy_to_clipboard(self.fix.verify.command)
        self.notify(t("Copied: {command}", command=self.fix.verify.command), timeout=3)

    def action_copy_code(self) -> None:
        if self.fix.code is None:
            self.notify(t("This fix has no code."), severity="warning")
            return
        self.app.copy_to_clipboard(self.fix.code.after)
        self.notify(t("Copied the fixed code."), timeout=3)

    def action_verified(self, outcome: str) -> None:
        """The repair loop: the verify command's outcome is evidence about the cause."""
        self.post_message(VerifyReported(self.fix.id, outcome, self.cause_id))

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(None)

"""A one-line problem report that takes no room while there is nothing to report."""

from __future__ import annotations

from textual.content import Content
from textual.widgets import Static


class ErrorLine(Static):
    DEFAULT_CLASSES = "error"

    def on_mount(self) -> None:
        self.display = False

    def show(self, message: str) -> None:
        self.update(Content(message))
        self.display = bool(message)

    @property
    def message(self) -> str:
        return str(self.content)

"""A Static whose Chinese text is wrapped by cells at the widget's width (see layout_text)."""

from __future__ import annotations

from typing import Any

from textual import events
from textual.content import Content
from textual.widgets import Static

from ddpadvisor.tui.layout_text import paragraph


class Paragraph(Static):
    """Holds its text and re-wraps it on every resize; text without CJK is left to textual."""

    def __init__(self, text: str | Content = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.text = text
        self._draw()

    def set_text(self, text: str | Content) -> None:
        self.text = text
        self._draw()

    def on_resize(self, event: events.Resize) -> None:
        self._draw()

    def _draw(self) -> None:
        width = self.content_size.width if self.is_mounted else 0
        self.update(paragraph(self.text, width))

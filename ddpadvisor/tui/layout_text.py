"""Text layout shared by the panels: a head followed by text that wraps under itself."""

from __future__ import annotations

from textual.content import Content


def hang(head: Content, body: Content, width: int) -> Content:
    """``head`` then ``body`` wrapped to ``width``, continuation lines indented to the body's
    start, so a column of labels stays readable. Width 0 (not laid out yet): no wrapping."""
    indent = head.cell_length
    room = width - indent
    if width <= 0 or room < 12:
        return head + body
    lines = body.wrap(room)
    pad = Content(" " * indent)
    return Content("\n").join([head + lines[0], *(pad + line for line in lines[1:])])

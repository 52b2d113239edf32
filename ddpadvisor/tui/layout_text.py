"""Text layout shared by the panels, counted in terminal cells (a CJK character takes two).

``hang`` puts a head before text that wraps under itself; ``wrap`` breaks Content at spaces and
between CJK characters (never before closing punctuation), keeping its styles; ``pad`` fills a
label to a width in cells.
"""

from __future__ import annotations

import re

from rich.cells import cell_len
from textual.content import Content

_CJK = "\u2e80-\u9fff\uf900-\ufaff\uff00-\uffef\u3000-\u303f"
_TOKEN = re.compile(rf"\s+|[{_CJK}]|[^\s{_CJK}]+")
_HAS_CJK = re.compile(f"[{_CJK}]")
_CLOSING = set("，。；：、！？）》」』】,.;:!?)")
_OPENING = set("（《「『【(")


def _breaks(plain: str, width: int) -> list[tuple[int, int]]:
    """(start, end) character spans of the wrapped lines, spaces at the breaks left out."""
    tokens: list[tuple[int, int]] = []
    for m in _TOKEN.finditer(plain):
        tok = m.group()
        if tokens and not tok.isspace():
            last = plain[tokens[-1][0] : tokens[-1][1]]
            if not last.isspace() and (tok[0] in _CLOSING or last[-1] in _OPENING):
                tokens[-1] = (tokens[-1][0], m.end())
                continue
        tokens.append((m.start(), m.end()))
    lines: list[tuple[int, int]] = []
    start = end = -1
    used = 0
    for a, b in tokens:
        tok = plain[a:b]
        if tok.isspace():
            if start >= 0:
                used += cell_len(tok)
            continue
        w = cell_len(tok)
        if start < 0:
            start, end, used = a, b, w
        elif used + w > width:
            lines.append((start, end))
            start, end, used = a, b, w
        else:
            end, used = b, used + w
        while used > width and end - start > 1:  # a token wider than the line: cut it by cells
            cut = start
            room = 0
            while cut < end and room + cell_len(plain[cut]) <= width:
                room += cell_len(plain[cut])
                cut += 1
            if cut < end and plain[cut] in _CLOSING and cut - start > 1:
                cut -= 1  # never open the next line on closing punctuation
            cut = max(cut, start + 1)
            lines.append((start, cut))
            start = cut
            used = cell_len(plain[start:end])
    if start >= 0:
        lines.append((start, end))
    return lines or [(0, 0)]


def has_cjk(s: str) -> bool:
    return _HAS_CJK.search(s) is not None


def wrap(body: Content, width: int) -> list[Content]:
    """``body`` broken into lines of at most ``width`` cells. Text without CJK characters wraps
    exactly as textual wraps it."""
    if width <= 0:
        return [body]
    if not has_cjk(body.plain):
        return list(body.wrap(width))
    out: list[Content] = []
    for para in body.split("\n"):
        out.extend(para[a:b] for a, b in _breaks(para.plain, width))
    return out


def hang(head: Content, body: Content, width: int) -> Content:
    """``head`` then ``body`` wrapped to ``width``, continuation lines indented to the body's
    start, so a column of labels stays readable. Width 0 (not laid out yet): no wrapping."""
    indent = head.cell_length
    room = width - indent
    if width <= 0 or room < 12:
        return head + body
    lines = wrap(body, room)
    pad_ = Content(" " * indent)
    return Content("\n").join([head + lines[0], *(pad_ + line for line in lines[1:])])


def pad(label: str, width: int) -> str:
    """``label`` followed by spaces up to ``width`` cells (f"{x:<9}" counts characters)."""
    return label + " " * max(0, width - cell_len(label))


def paragraph(text: str | Content, width: int) -> Content:
    """Text the panel wraps: Chinese is broken here, by cells and between characters (textual
    would move a long run of CJK text to the next line whole); anything else is left to
    textual as before."""
    body = Content(text) if isinstance(text, str) else text
    if width <= 0 or not has_cjk(body.plain):
        return body
    return Content("\n").join(wrap(body, width))

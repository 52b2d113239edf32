"""Bounded reading of an attached file: regular files only, size-capped, text or not."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ddpadvisor.yamlio import read_bounded

MAX_BYTES = (
    32 << 20
)  # read of one attached file (about 45 s of parsing for a text log); a longer one is read up to here
SNIFF = 8192


@dataclass
class Text:
    path: Path
    text: str
    truncated: bool  # longer than MAX_BYTES: only the start was read

    @property
    def name(self) -> str:
        return self.path.name

    def where(self, line: int | None) -> str:
        return f"{self.path.name}:{line}" if line else self.path.name


class Binary(Exception):
    """The file is not text (a TensorBoard event file, a pickle, an archive)."""


def read(path: Path, limit: int | None = None) -> Text:
    """The file's text; InputError (one line) when it cannot be read, Binary when not text."""
    limit = MAX_BYTES if limit is None else limit
    raw, longer = read_bounded(
        path, limit, folder="a folder, not a file (attach the files in it one by one)"
    )
    head = raw[:SNIFF]
    if b"\x00" in head:
        raise Binary("holds NUL bytes")
    text = raw.decode("utf-8", errors="replace")
    bad = text[: SNIFF * 2].count("\ufffd")
    if bad > max(8, len(head) // 50):
        raise Binary("not UTF-8 text")
    if longer:  # the last line may be cut
        text = text.rsplit("\n", 1)[0]
    return Text(path, text, longer)

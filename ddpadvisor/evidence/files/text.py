"""Bounded reading of an attached file: regular files only, size-capped, text or not."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ddpadvisor.errors import InputError
from ddpadvisor.yamlio import NotARegularFile, read_regular

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
    try:
        raw, longer = read_regular(path, limit)
    except FileNotFoundError:
        raise InputError("no such file", path) from None
    except IsADirectoryError:
        raise InputError("a folder, not a file (attach the files in it one by one)", path) from None
    except NotARegularFile:
        raise InputError(
            "not a regular file (a pipe, a device or a folder); not read", path
        ) from None
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", path) from None
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

"""argparse ``type=`` checks for the options of a run (``probe``, ``trace``).

Each refuses a value that would launch a run other than the one asked for (``--nproc 0``
launched two ranks, ``--timeout nan`` ran with "deadline nan s", ``--collective-timeout -1``
launched and then failed): argparse turns the ``ArgumentTypeError`` into one line, exit 2.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable


def count(least: int) -> Callable[[str], int]:
    """A whole number at least ``least`` (ranks, nodes, steps, sizes)."""

    def parse(text: str) -> int:
        try:
            value = int(text.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < least:
            raise argparse.ArgumentTypeError(f"must be at least {least}, got {value}")
        return value

    parse.__name__ = "count"
    return parse


def seconds(*, zero: bool) -> Callable[[str], float]:
    """A finite number of seconds above 0 (or exactly 0 where ``zero``: no limit)."""

    def parse(text: str) -> float:
        try:
            value = float(text.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
        if not math.isfinite(value) or value < 0 or (value == 0 and not zero):
            least = "0 or more (0: no limit)" if zero else "a number above 0"
            raise argparse.ArgumentTypeError(f"must be {least} seconds, got {text.strip()!r}")
        return value

    parse.__name__ = "seconds"
    return parse


def word(what: str) -> Callable[[str], str]:
    """A non-empty value without surrounding blanks (a cause id, a run id)."""

    def parse(text: str) -> str:
        if not text.strip():
            raise argparse.ArgumentTypeError(f"needs {what}, got an empty value")
        return text.strip()

    parse.__name__ = "word"
    return parse

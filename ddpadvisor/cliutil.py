"""argparse that reports a usage error as one line on stderr and exits 2."""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        from ddpadvisor.terminal import shown

        sys.stderr.write(f"{self.prog}: error: {shown(message, one_line=True)} (see --help)\n")
        raise SystemExit(2)


def positive_int(text: str) -> int:
    """argparse type of a count the user gives (``--top``): an integer of at least 1."""
    try:
        value = int(text) if len(text) <= 20 else None
    except ValueError:
        value = None
    if value is None:
        raise argparse.ArgumentTypeError(f"expects an integer, got {text[:40]!r}")
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value

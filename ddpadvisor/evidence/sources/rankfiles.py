"""The one spelling of per-rank file names: ``rank<R>.<suffix>`` in a run's folder.

The trace agent writes ``rank<R>.jsonl`` (and ``.progress``, ``.stack``, its DataLoader
workers ``.workers.jsonl``), a probe
``<probe>/rank<R>.json``. Every reader and the launchers' clean-up find them here.
"""

from __future__ import annotations

import re
from pathlib import Path

# A rank is a decimal without leading zeros, at most 7 digits (MAX_WORLD is 2**20).
RANK = r"(0|[1-9][0-9]{0,6})"
TRACE_SUFFIXES = ("jsonl", "progress", "stack", "progress.tmp", "workers.jsonl")
_NAME = re.compile(rf"^rank{RANK}\.([a-z.]+)$")


def rank_of(name: str, suffix: str) -> int | None:
    """The rank in a file name ``rank<R>.<suffix>``, or None for any other name."""
    m = _NAME.match(name)
    if m is None or m.group(2) != suffix:
        return None
    return int(m.group(1))


def rank_file(folder: Path, rank: int, suffix: str) -> Path:
    return folder / f"rank{rank}.{suffix}"


def rank_files(folder: Path, suffix: str) -> list[tuple[int, Path]]:
    """``(rank, path)`` of every ``rank<R>.<suffix>`` directly in ``folder``, by rank."""
    found: list[tuple[int, Path]] = []
    try:
        entries = list(folder.iterdir())
    except OSError:
        return []
    for path in entries:
        rank = rank_of(path.name, suffix)
        if rank is not None:
            found.append((rank, path))
    return sorted(found)


def is_trace_file(name: str) -> bool:
    """A file the trace agent or launcher writes (the launcher clears these before a run)."""
    if name in ("meta.json", "torchrun.log"):
        return True
    return any(rank_of(name, suffix) is not None for suffix in TRACE_SUFFIXES)

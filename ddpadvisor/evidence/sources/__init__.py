"""The registry of evidence sources: one module per source, in precedence order.

Each module declares one :class:`~ddpadvisor.evidence.sources.base.Source` (``SOURCE``): its
name, the precedence of what it observes, its command-line flag(s), its reader and, where it
has them, its rows for the TUI's run panel and its series for plots.
:func:`ddpadvisor.evidence.gather.gather`, the CLI's flags and the TUI read sources through
here; adding a source is adding a module and naming it in :data:`ORDER`.

Order matters only within a precedence level (the later observation wins there): a
description first, then an answers file, then ``--set``.
"""

from __future__ import annotations

from pathlib import Path

from ddpadvisor.evidence.sources import (
    answers,
    attach,
    describe,
    probe,
    reference,
    script,
    sets,
    trace,
)
from ddpadvisor.evidence.sources.base import Flag, RankRow, Series, Source

ORDER: tuple[Source, ...] = (
    describe.SOURCE,
    answers.SOURCE,
    sets.SOURCE,
    script.SOURCE,
    attach.SOURCE,
    reference.SOURCE,
    probe.SOURCE,
    trace.SOURCE,
)

__all__ = [
    "ORDER",
    "Flag",
    "RankRow",
    "Series",
    "Source",
    "attached_path",
    "by_kind",
    "by_name",
    "precedence",
]


def by_name(name: str) -> Source:
    for source in ORDER:
        if source.name == name:
            return source
    raise KeyError(name)


def by_kind(kind: str) -> Source | None:
    """The source the TUI calls ``kind`` ("trace", "probe", "script", ...)."""
    return next((s for s in ORDER if kind in s.kinds), None)


def precedence() -> dict[str, int]:
    """Observation source -> rank, as the sources declare it (the engine's table matches)."""
    return {s.observes: s.precedence for s in ORDER}


def attached_path(value: str) -> Path:
    """The file or folder of a ``[KIND:]PATH`` value given to ``--attach`` (or in the TUI)."""
    from ddpadvisor.evidence.files.detect import split_kind

    return split_kind(value)[1]

"""What one evidence source declares: its name, precedence, CLI flags and readers.

A source module builds one :class:`Source` named ``SOURCE``; :mod:`ddpadvisor.evidence.sources`
collects them in :data:`ORDER`. The readers are imported inside the functions a source names,
so the registry itself loads no reader (``--json --answers`` never imports the trace reader or
the scanner, and nothing here imports torch).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ddpadvisor.kb.model import KnowledgeBase
    from ddpadvisor.observation import Gathered, ObsSource


@dataclass(frozen=True)
class Flag:
    """One command-line option of a source (``action="append"``: repeatable)."""

    name: str  # "--trace"
    metavar: str  # "DIR"
    help: str
    path: bool = True  # the value is a path (else a string, e.g. --set FACT=VALUE)


@dataclass(frozen=True)
class RankRow:
    """One line of the per-rank result table of the TUI's run panel."""

    rank: str
    item: str
    value: str
    ok: bool | None = None  # None: informational


@dataclass
class Series:
    """Per-rank time series for plots: series name -> rank -> [(step, value)] in step order."""

    series: dict[str, dict[int, list[tuple[int, float]]]] = field(default_factory=dict)
    skipped_lines: int = 0
    # what a reader detected on a series: name -> rank -> [(step, "spike" | "nan")]
    marks: dict[str, dict[int, list[tuple[int, str]]]] = field(default_factory=dict)
    files: dict[int, str] = field(default_factory=dict)  # rank -> the file its series came from
    per_rank: bool = False  # the ranks were read from the files (else one run, called rank 0)
    warnings: list[str] = field(default_factory=list)  # the reader's, one line each

    def ranks(self) -> list[int]:
        return sorted({r for by_rank in self.series.values() for r in by_rank})

    def steps(self, rank: int) -> int:
        return max((len(by_rank.get(rank, [])) for by_rank in self.series.values()), default=0)

    def has(self, name: str) -> bool:
        return any(self.series.get(name, {}).values())


Reader = Callable[["KnowledgeBase", Any], "Gathered"]
# Reads every value given to the source at once, with the whole request (the trace scans the
# script it ran unless --script named it).
ReadAll = Callable[["KnowledgeBase", Sequence[Any], Any], "Gathered"]


@dataclass(frozen=True)
class Source:
    """One evidence source.

    ``field`` is its list in :class:`ddpadvisor.evidence.gather.Sources` and the ``dest`` of
    its flags; ``observes`` the :data:`ddpadvisor.observation.ObsSource` its observations carry
    and ``precedence`` that source's rank (higher wins; equal: the later one wins), the same
    number as the engine's table (a test holds them equal)."""

    name: str
    field: str
    observes: ObsSource
    precedence: int
    flags: tuple[Flag, ...]
    read: Reader
    summary: str  # one line for the README and ``--help``
    read_all: ReadAll | None = None
    rows: Callable[[Path | None], list[RankRow]] | None = None
    series: Callable[[Path], Series] | None = None
    kinds: tuple[str, ...] = ()  # the TUI's names for it ("trace", "probe", ...)

    def gather(self, kb: KnowledgeBase, values: Sequence[Any], request: Any) -> Gathered:
        from ddpadvisor.observation import Gathered

        if self.read_all is not None:
            return self.read_all(kb, values, request)
        out = Gathered()
        for value in values:
            out.extend(self.read(kb, value))
        return out

"""The loss curves of the files a user attaches, as the describe screen draws them.

The attach source of the evidence registry reads each file or folder and gives its series
(:mod:`ddpadvisor.evidence.sources`); this module only lays them out for a plot: one line per
rank (or per file, where a file names no rank), the reference run's lines beside them, and the
spikes and non-finite values the reader detected. Nothing here imports textual.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ddpadvisor.errors import InputError
from ddpadvisor.evidence.sources import Series, by_name
from ddpadvisor.i18n import t
from ddpadvisor.terminal import shown

if TYPE_CHECKING:
    from ddpadvisor.kb.model import KnowledgeBase

Points = list[tuple[int, float]]


@dataclass
class Line:
    """One plotted loss curve."""

    label: str  # "rank 1", or the file's name when the file names no rank
    reference: bool  # a line of the good run given to compare with
    points: Points
    file: str  # the file (inside an attached folder: the event file) it came from
    spikes: Points = field(default_factory=list)  # the top of each detected spike
    nonfinite: list[int] = field(default_factory=list)  # steps whose loss is NaN or inf

    @property
    def steps(self) -> tuple[int, int]:
        return self.points[0][0], self.points[-1][0]


@dataclass
class Curves:
    lines: list[Line] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # one line per file that was not read
    notes: list[str] = field(default_factory=list)  # files read, but without a loss curve
    # the values that read, to load (True: a reference log), in the order given
    readable: list[tuple[str, bool]] = field(default_factory=list)

    def runs(self) -> list[Line]:
        return [line for line in self.lines if not line.reference]

    def references(self) -> list[Line]:
        return [line for line in self.lines if line.reference]


def _lines(got: Series, name: str, reference: bool) -> list[Line]:
    out: list[Line] = []
    for rank, points in sorted(got.series.get("loss", {}).items()):
        file = shown(got.files.get(rank, name), one_line=True)
        label = t("rank {rank}", rank=rank) if got.per_rank else shown(name, one_line=True)
        if reference:
            label = t("reference {label}", label=label) if got.per_rank else t("reference")
        at = dict(points)
        marks = got.marks.get("loss", {}).get(rank, [])
        spikes = [(step, at[step]) for step, kind in marks if kind == "spike" and step in at]
        nonfinite = [step for step, kind in marks if kind == "nan"]
        out.append(Line(label, reference, points, file, spikes, nonfinite))
    return out


def of_session(series: Sequence[tuple[str, bool, Series]]) -> Curves:
    """The lines of the series a session kept for its attached files (no reading)."""
    out = Curves()
    for name, reference, got in series:
        out.lines.extend(_lines(got, name, reference))
    return out


def read_curves(kb: KnowledgeBase, attach: Sequence[str], reference: Sequence[str] = ()) -> Curves:
    """Read every ``[KIND:]PATH`` (slow for a large log: call it off the UI thread). A file
    with no loss curve is kept when it settles a fact (a config, an environment dump), else
    its reader's first warning is its problem."""
    source = by_name("attach")
    assert source.series is not None
    out = Curves()
    for values, is_ref in ((attach, False), (reference, True)):
        for value in values:
            name = Path(value).name
            try:
                got = source.series(Path(value))
                lines = _lines(got, name, is_ref)
                facts = None if lines else source.read(kb, value)
            except InputError as exc:
                out.problems.append(shown(exc.one_line(), one_line=True))
                continue
            except (OSError, ValueError, RecursionError, MemoryError) as exc:
                # a reader's bug must not take the screen down; the name of the error is enough
                out.problems.append(
                    shown(f"{value}: not read ({type(exc).__name__})", one_line=True)
                )
                continue
            if facts is not None and not facts.observations:
                why = got.warnings[0] if got.warnings else f"{value}: {t('nothing read')}"
                out.problems.append(shown(why, one_line=True))
                continue
            out.readable.append((value, is_ref))
            out.lines.extend(lines)
            if not lines:
                out.notes.append(
                    t("{name}: read, no loss curve in it", name=shown(name, one_line=True))
                )
    return out


PASTED = "pasted.txt"  # the name the facts of a pasted log cite ("pasted.txt:12")
MIN_PASTED_POINTS = 3  # fewer losses in a description are a sentence, not a log


def read_pasted(kb: KnowledgeBase, text: str, folder: Path) -> Curves:
    """A training log pasted into the description, written to ``folder/pasted.txt`` (a
    private folder the caller removes) and read as an attached file is; kept only when it
    holds a loss curve of :data:`MIN_PASTED_POINTS` or more (else: nothing, no problem)."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = folder / PASTED
    path.write_text(text, encoding="utf-8")
    got = read_curves(kb, [str(path)])
    if got.problems or max((len(x.points) for x in got.lines), default=0) < MIN_PASTED_POINTS:
        return Curves()
    for line in got.lines:
        if line.label == PASTED:
            line.label = t("your text")
    got.notes = []
    return got


def joined(first: Curves, second: Curves) -> Curves:
    return Curves(
        first.lines + second.lines,
        first.problems + second.problems,
        first.notes + second.notes,
        first.readable + second.readable,
    )

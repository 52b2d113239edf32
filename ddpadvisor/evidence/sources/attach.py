"""``--attach FILE`` (repeatable): a file the user already has — a training log, a TensorBoard
event file or log folder, a config, the launch command, an environment dump — read for facts.
The kind is detected from the content; ``--attach KIND:FILE`` names it (kinds:
:data:`ddpadvisor.evidence.files.detect.KINDS`).

Its observations carry the source ``log``: the run's own record ranks above what was answered
or scanned and below what ddpadvisor measured itself (a probe or a trace).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ddpadvisor.evidence.sources.base import Flag, Series, Source

if TYPE_CHECKING:
    from ddpadvisor.evidence.files.found import Read
    from ddpadvisor.kb.model import KnowledgeBase
    from ddpadvisor.observation import Gathered

_CACHE: dict[tuple[str, str | None, int, int], Read] = {}
_SERIES: dict[int, tuple[Read, Series]] = {}  # id(read) -> (read, its series): read once


def read_one(value: str | Path) -> Read:
    """One attached file, read once per content (the reference comparison reads it again)."""
    from ddpadvisor.evidence.files import detect, facts

    kind, path = detect.split_kind(str(value))
    try:
        st = path.stat()
        key = (str(path.resolve()), kind, st.st_mtime_ns, st.st_size)
    except OSError:
        key = None
    if key is not None and key in _CACHE:
        return _CACHE[key]
    got = detect.read_attached(path, kind)
    curve = facts.main_curve(got)
    if curve is not None:
        facts.curve_findings(curve, got)
    facts.overflow_findings(got)
    facts.rank_findings(got)
    if key is not None:
        if len(_CACHE) > 64:
            _CACHE.clear()
        _CACHE[key] = got
    return got


def read_all(kb: KnowledgeBase, values: Sequence[str | Path], request: Any) -> Gathered:
    from ddpadvisor.evidence.files import facts

    reads = [read_one(v) for v in values]
    reads.append(facts.schedule_findings(reads))
    return facts.to_gathered(kb, reads)


def read(kb: KnowledgeBase, value: str | Path) -> Gathered:
    return read_all(kb, [value], None)


def series(path: Path | str) -> Series:
    """The attached log's loss, learning rate and grad norm per rank (no rank: 0), finite
    values only, for plots; the loss's spikes (as the loss pattern finds them) and non-finite
    values are its marks. Raises InputError (one line) for a file that cannot be read."""
    from ddpadvisor.evidence.files import facts
    from ddpadvisor.evidence.files.curve import spike_peaks

    got = read_one(path)
    hit = _SERIES.get(id(got))
    if hit is not None and hit[0] is got:  # the same read (the TUI draws, then attaches)
        return hit[1]
    out = Series()
    out.warnings = list(got.warnings)
    main = facts.main_curve(got)
    for curve in got.curves:
        if curve.rank is None and main is not None and curve is not main:
            continue  # another run of a log folder: the plot shows the run that was read
        rank = curve.rank or 0
        out.per_rank = out.per_rank or curve.rank is not None
        out.files[rank] = curve.file
        marks = [(int(p.step), "nan") for p in curve.loss if not math.isfinite(p.value)]
        marks += [(int(p.step), "spike") for p in spike_peaks(curve.loss)]
        if marks:
            out.marks.setdefault("loss", {})[rank] = sorted(marks)
        for name, points in (
            ("loss", curve.loss),
            ("lr", curve.lr),
            ("grad_norm", curve.grad_norm),
        ):
            kept = [(int(p.step), p.value) for p in points if math.isfinite(p.value)]
            if kept:
                out.series.setdefault(name, {})[rank] = kept
    if len(_SERIES) > 64:
        _SERIES.clear()
    _SERIES[id(got)] = (got, out)
    return out


SOURCE = Source(
    name="attach",
    field="attach",
    observes="log",
    precedence=3,
    flags=(
        Flag(
            "--attach",
            "[KIND:]FILE",
            "a file you have: training log, trainer_state.json, metrics CSV, TensorBoard "
            "event file or log folder, DeepSpeed / accelerate / TrainingArguments config, "
            "launch command, pip list, nvidia-smi, collect_env; kind detected from the "
            "content; repeatable",
            path=False,
        ),
    ),
    read=read,
    read_all=read_all,
    series=series,
    summary="the run's own files: loss curve, overflow messages, configs, versions",
    kinds=("attach",),
)

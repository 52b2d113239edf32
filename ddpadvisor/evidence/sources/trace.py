"""``--trace DIR``: the folder ``ddpadvisor trace`` wrote (``rank<R>.jsonl`` per rank, the
launcher's ``meta.json``).

The facts come from :mod:`ddpadvisor.evidence.trace`. The same folder also gives the TUI its
per-rank table (:func:`rows`) and its plots (:func:`series`: loss, grad norm, GradScaler
scale per rank). Every one of them reads the lines through the trace's one parser
(:func:`ddpadvisor.evidence.trace.load.lines_of`); the plots keep whatever step values they
find, so a format change degrades a plot rather than the session: records without a kind or of
kind ``step``, the step under ``s`` or ``step``, each value under the first key of its list
below (top level or under ``values``/``metrics``/``data``); a list of values (one per
micro-batch) plots as its mean. The rank comes from a ``rank`` key or from the file name.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ddpadvisor.evidence.sources.base import Flag, RankRow, Series, Source
from ddpadvisor.evidence.sources.rankfiles import rank_of
from ddpadvisor.yamlio import read_regular

if TYPE_CHECKING:
    from ddpadvisor.kb.model import KnowledgeBase
    from ddpadvisor.observation import Gathered

# Plotted series and the record keys each may be stored under.
# The synchronised norm ("post") is what the optimizer steps on; "pre" is the local one.
SERIES_KEYS: dict[str, tuple[str, ...]] = {
    "loss": ("loss", "local_loss", "train_loss"),
    "grad_norm": ("grad_norm", "post", "pre", "gnorm", "total_grad_norm"),
    "scale": ("scale", "grad_scale", "scaler_scale", "loss_scale"),
}
STEP_KEYS = ("step", "s")
STEP_KINDS = (None, "step")
_NESTED = ("values", "metrics", "data")
MAX_BYTES = 256 << 20  # of each file, for a plot


def read(kb: KnowledgeBase, path: Path) -> Gathered:
    from ddpadvisor.evidence.trace import read_trace

    return read_trace(kb, path)


def read_all(kb: KnowledgeBase, paths: Sequence[Path], request: Any) -> Gathered:
    """Each trace, and the script each one ran (below the trace in precedence) unless
    ``--script`` named it already."""
    from ddpadvisor.observation import Gathered

    out = Gathered()
    traced = [read(kb, path) for path in paths]
    named = {p.resolve() for p in getattr(request, "scripts", [])}
    for path in paths:
        _scan_traced_script(kb, path, named, out)
    for got in traced:
        out.extend(got)
    return out


def _scan_traced_script(kb: KnowledgeBase, trace: Path, named: set[Path], out: Gathered) -> None:
    """``--trace DIR`` also scans the script the trace ran (its command line is in the trace),
    unless ``--script`` named it already; says so, or why not, in a warning."""
    from ddpadvisor.errors import InputError
    from ddpadvisor.evidence.script_scan import scan_script
    from ddpadvisor.evidence.trace import traced_script

    script, why = traced_script(trace)
    if script is None:
        out.warnings.append(f"trace {trace}: the traced script was not scanned: {why}")
        return
    if script.resolve() in named:
        return
    if named:
        out.warnings.append(
            f"trace {trace}: the job ran {script}, not the script --script names; both are "
            "scanned, so their findings and warnings may repeat"
        )
    named.add(script.resolve())
    try:
        got = scan_script(kb, script)
    except InputError as exc:
        out.warnings.append(f"trace {trace}: the traced script was not scanned: {exc.one_line()}")
        return
    out.extend(got)
    out.warnings.append(
        f"trace {trace}: also scanned the traced script {script} (from the trace's command "
        "line); the trace's measurements take precedence"
    )


# -- plots and the run panel ------------------------------------------------------------------


def _number(value: object) -> float | None:
    if isinstance(value, list):
        xs = [x for x in (_number(v) for v in value) if x is not None]
        return sum(xs) / len(xs) if xs else None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    x = float(value)
    return x if math.isfinite(x) else None


def _step(record: dict[str, object]) -> int | None:
    for key in STEP_KEYS:
        step = record.get(key)
        if isinstance(step, int) and not isinstance(step, bool):
            return step
    return None


def _lookup(record: dict[str, object], keys: tuple[str, ...]) -> float | None:
    places: list[dict[str, object]] = [record]
    places += [v for v in (record.get(n) for n in _NESTED) if isinstance(v, dict)]
    for place in places:
        for key in keys:
            value = _number(place.get(key))
            if value is not None:
                return value
    return None


def series(folder: Path) -> Series:
    from ddpadvisor.evidence.trace.load import lines_of

    out = Series()
    if not folder.is_dir():
        return out
    for path in sorted(folder.rglob("*.jsonl")):
        path_rank = rank_of(path.name, "jsonl")
        try:
            raw, _longer = read_regular(path, MAX_BYTES)  # a FIFO or device is never opened
        except OSError:
            continue
        for line in lines_of(raw):
            if line.problem is not None:
                out.skipped_lines += 1
                continue
            record = line.record
            if not isinstance(record, dict) or record.get("k") not in STEP_KINDS:
                continue
            step = _step(record)
            if step is None:
                continue
            rank = record.get("rank", path_rank)
            if isinstance(rank, bool) or not isinstance(rank, int):
                continue
            for name, keys in SERIES_KEYS.items():
                value = _lookup(record, keys)
                if value is not None:
                    out.series.setdefault(name, {}).setdefault(rank, []).append((step, value))
    for by_rank in out.series.values():
        for points in by_rank.values():
            points.sort(key=lambda p: p[0])
    return out


def rows(out_dir: Path | None) -> list[RankRow]:
    if out_dir is None or not out_dir.is_dir():
        return []
    found = series(out_dir)
    out = []
    for rank in found.ranks():
        out.append(RankRow(str(rank), "steps recorded", str(found.steps(rank))))
        for name in ("loss", "grad_norm", "scale"):
            points = found.series.get(name, {}).get(rank)
            if points:
                out.append(RankRow(str(rank), f"last {name}", f"{points[-1][1]:.4g}"))
    return out


SOURCE = Source(
    name="trace",
    field="traces",
    observes="trace",
    precedence=4,
    flags=(Flag("--trace", "DIR", "output folder of 'ddpadvisor trace'"),),
    read=read,
    read_all=read_all,
    rows=rows,
    series=series,
    summary="measured: your unmodified script's run, rank by rank",
    kinds=("trace",),
)

"""Per-rank time series (loss, grad norm, GradScaler scale) read from a trace folder.

This is the one place that knows the trace record layout for plotting. The format belongs to
ddpadvisor.tracing (its agent writes ``rank<R>.jsonl``: step records ``{"k": "step", "s": N,
"loss": [one per backward], "pre": local grad norm, "post": synchronised grad norm, "scale": …}``
next to check and configuration records). It is read defensively, so a format change degrades a
plot rather than the session: every ``*.jsonl`` under the folder, records without a kind or of
kind ``step``, the step under ``s`` or ``step``, each value under the first key of its list
below (top level or under ``values``/``metrics``); a list of values (one per micro-batch) plots as
its mean. The rank comes from a ``rank`` key or from the file name. Unreadable lines are counted.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

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
_RANK_IN_PATH = re.compile(r"rank[_-]?(\d+)")
MAX_BYTES = 256 << 20  # of each file, for a plot


@dataclass
class TraceSeries:
    # series name -> rank -> [(step, value)] in step order
    series: dict[str, dict[int, list[tuple[int, float]]]] = field(default_factory=dict)
    skipped_lines: int = 0

    def ranks(self) -> list[int]:
        return sorted({r for by_rank in self.series.values() for r in by_rank})

    def steps(self, rank: int) -> int:
        return max((len(by_rank.get(rank, [])) for by_rank in self.series.values()), default=0)

    def has(self, name: str) -> bool:
        return any(self.series.get(name, {}).values())


def _rank_from_path(path: Path) -> int | None:
    for part in reversed(path.parts):
        m = _RANK_IN_PATH.search(part)
        if m:
            return int(m.group(1))
    return None


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


def read_series(folder: Path) -> TraceSeries:
    out = TraceSeries()
    if not folder.is_dir():
        return out
    for path in sorted(folder.rglob("*.jsonl")):
        path_rank = _rank_from_path(path.relative_to(folder))
        if not path.is_file():  # a FIFO or device would block or never end: never opened
            continue
        try:
            with path.open("rb") as fh:
                raw = fh.read(MAX_BYTES)
        except OSError:
            continue
        lines = raw.decode("utf-8", errors="replace").splitlines()
        for line in lines:
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError:
                out.skipped_lines += 1
                continue
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

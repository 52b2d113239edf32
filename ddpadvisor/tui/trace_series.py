"""Per-rank time series (loss, grad norm, GradScaler scale) read from a trace folder.

This is the one place that knows the trace record layout for plotting. The trace format belongs
to ddpadvisor.tracing; until it is final this adapter reads it defensively: every ``*.jsonl``
file under the folder, one JSON object per line, with a ``step`` and any of the value keys below
(top level or under ``values``/``metrics``). The rank comes from a ``rank`` key or from the file
name (``rank1.jsonl``, ``rank-1/…``). Lines that do not parse are counted, not fatal.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

# Plotted series and the record keys each may be stored under.
SERIES_KEYS: dict[str, tuple[str, ...]] = {
    "loss": ("loss", "local_loss", "train_loss"),
    "grad_norm": ("grad_norm", "gnorm", "total_grad_norm"),
    "scale": ("scale", "grad_scale", "scaler_scale", "loss_scale"),
}
_NESTED = ("values", "metrics", "data")
_RANK_IN_PATH = re.compile(r"rank[_-]?(\d+)")


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
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    x = float(value)
    return x if math.isfinite(x) else None


def _lookup(record: dict[str, object], keys: tuple[str, ...]) -> float | None:
    for key in keys:
        if key in record:
            return _number(record[key])
    for nest in _NESTED:
        inner = record.get(nest)
        if isinstance(inner, dict):
            for key in keys:
                if key in inner:
                    return _number(inner[key])
    return None


def read_series(folder: Path) -> TraceSeries:
    out = TraceSeries()
    if not folder.is_dir():
        return out
    for path in sorted(folder.rglob("*.jsonl")):
        path_rank = _rank_from_path(path.relative_to(folder))
        try:
            lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            continue
        for line in lines:
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError:
                out.skipped_lines += 1
                continue
            if not isinstance(record, dict):
                continue
            step = record.get("step")
            if isinstance(step, bool) or not isinstance(step, int):
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

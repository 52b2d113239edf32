"""Per-rank time series (loss, grad norm, GradScaler scale) of a trace folder, for the plots.

The trace source of the evidence registry owns the folder's format and reads it
(:mod:`ddpadvisor.evidence.sources`); this module only names it for the TUI.
"""

from __future__ import annotations

from pathlib import Path

from ddpadvisor.evidence.sources import Series, by_name

TraceSeries = Series


def read_series(folder: Path) -> TraceSeries:
    read = by_name("trace").series
    assert read is not None
    return read(folder)

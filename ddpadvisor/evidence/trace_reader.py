"""Compatibility entry point: the trace reader lives in :mod:`ddpadvisor.evidence.trace`."""

from __future__ import annotations

from ddpadvisor.evidence.trace import RankTrace, load_trace, read_trace, traced_script

__all__ = ["RankTrace", "load_trace", "read_trace", "traced_script"]

"""``--probe-results DIR``: the folder ``ddpadvisor probe`` (or a probe run by hand) wrote.

The reader is :mod:`ddpadvisor.evidence.probe_results`; :func:`rows` is the TUI run panel's
per-rank table of the same folder (``<out>/<probe>/rank<R>.json`` with the probe's status and
a one-line summary). Files of another shape are read defensively: their scalar fields are
listed, so the table survives a format change.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from ddpadvisor.evidence.sources.base import Flag, RankRow, Source
from ddpadvisor.evidence.sources.rankfiles import rank_of
from ddpadvisor.yamlio import read_regular

if TYPE_CHECKING:
    from ddpadvisor.kb.model import KnowledgeBase
    from ddpadvisor.observation import Gathered

ROW_FILE_BYTES = 16 << 20  # one result file, for the table


def read(kb: KnowledgeBase, path: Path) -> Gathered:
    from ddpadvisor.evidence.probe_results import read_probe_results

    return read_probe_results(kb, path)


def _rank_of(data: dict[str, object], path: Path) -> str | None:
    if isinstance(data.get("rank"), int) and not isinstance(data.get("rank"), bool):
        return str(data["rank"])
    rank = rank_of(path.name, "json")
    return None if rank is None else str(rank)  # not a per-rank file (the run's own record)


def _scalars(data: object, prefix: str = "", depth: int = 0) -> list[tuple[str, object]]:
    out: list[tuple[str, object]] = []
    if isinstance(data, dict) and depth < 3:
        for key, value in data.items():
            name = f"{prefix}.{key}" if prefix else str(key)
            if isinstance(value, (bool, int, float, str)) and value != "":
                out.append((name, value))
            elif isinstance(value, dict):
                out.extend(_scalars(value, name, depth + 1))
    return out


def _is_check(name: str) -> bool:
    leaf = name.rsplit(".", 1)[-1]
    return leaf in ("ok", "passed", "match", "matches", "correct") or leaf.endswith(
        ("_ok", "_match", "_matches", "_correct")
    )


def rows(out_dir: Path | None, limit: int = 200) -> list[RankRow]:
    """One row per rank and probe; other per-rank files (liveness status, unknown formats)
    only when no probe result is there, as their scalar fields."""
    if out_dir is None or not out_dir.is_dir():
        return []
    results: list[RankRow] = []
    other: list[RankRow] = []
    for path in sorted(out_dir.rglob("*.json")):
        try:
            raw, longer = read_regular(path, ROW_FILE_BYTES)
            data = None if longer else json.loads(raw.decode("utf-8"))
        except (OSError, ValueError, RecursionError):
            continue
        if not isinstance(data, dict):
            continue
        rank = _rank_of(data, path)
        if rank is None:
            continue
        if isinstance(data.get("probe"), str) and isinstance(data.get("status"), str):
            text = str(data.get("summary") or data.get("error") or data["status"])
            results.append(RankRow(rank, data["probe"], text[:120], data["status"] == "ok"))
            continue
        for name, value in _scalars(data):
            if name in ("rank", "world_size") or len(other) >= limit:
                continue
            text = str(value).lower() if isinstance(value, bool) else str(value)
            ok = value if isinstance(value, bool) and _is_check(name) else None
            other.append(RankRow(rank, name, text[:60], ok))
    return results[:limit] or other


SOURCE = Source(
    name="probe",
    field="probe_results",
    observes="probe",
    precedence=4,
    flags=(Flag("--probe-results", "DIR", "output folder of 'ddpadvisor probe'"),),
    read=read,
    rows=rows,
    summary="measured: environment, collectives, seeds, checksums on your machine",
    kinds=("probe",),
)

"""Small helpers shared by the topic readers: exact comparison, odd ranks, formatting."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from typing import Any, TypeGuard

from ddpadvisor.evidence.trace.load import Record


def _same(a: Any, b: Any) -> bool:
    """Exact equality where NaN equals NaN (a skipped fp16 step has NaN gradients everywhere)."""
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return bool(a == b)


def _odd_ranks(values: dict[int, Any]) -> list[int]:
    """Ranks whose value is not the most common one (ties: those that differ from rank 0)."""
    groups: list[tuple[Any, list[int]]] = []
    for rank, v in sorted(values.items()):
        for g in groups:
            if _same(g[0], v):
                g[1].append(rank)
                break
        else:
            groups.append((v, [rank]))
    if len(groups) <= 1:
        return []
    groups.sort(key=lambda g: (-len(g[1]), g[1][0]))
    majority = groups[0][1]
    if len(groups[0][1]) == len(groups[1][1]):
        majority = next(g[1] for g in groups if min(values) in g[1])
    return sorted(r for r in values if r not in majority)


def _ranks_text(ranks: Iterable[int]) -> str:
    ranks = list(ranks)
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(map(str, ranks))


def _fmt(x: Any) -> str:
    if isinstance(x, float):
        if math.isnan(x) or math.isinf(x):
            return str(x)
        return f"{x:.4g}"
    return str(x)


def _mode(values: list[Any]) -> Any:
    return Counter(values).most_common(1)[0][0] if values else None


def _finite(x: Any) -> TypeGuard[float]:
    return isinstance(x, (int, float)) and math.isfinite(x)


def _step_loss(rec: Record) -> float | None:
    losses = [v for v in rec.get("loss") or [] if isinstance(v, (int, float))]
    if not losses:
        return None
    return float(sum(losses) / len(losses))


def _covers(ep: Record) -> bool:
    """An iteration that went over its whole shard (an epoch), not a peek such as
    ``next(iter(loader))``. Without a dataset length, a finished iteration counts."""
    if not ep.get("complete"):
        return False
    total = _positive(ep.get("dataset_len"))
    if total is None:
        return True
    replicas = _positive(ep.get("num_replicas")) or _positive(ep.get("shards"))
    share = math.ceil(total / replicas) if replicas else total
    batch = _positive(ep.get("bs")) or 1
    mod = _positive(ep.get("mod")) or 1
    seen = len(ep.get("indices") or []) * mod
    if mod > 1:  # a hash-selected subset: its size is an estimate
        return seen >= 0.9 * share
    return seen > share - batch  # drop_last leaves out fewer than one batch


def _positive(x: Any) -> int | None:
    return x if isinstance(x, int) and not isinstance(x, bool) and x > 0 else None

"""The reading context shared by the topic readers, and the fact collector."""

from __future__ import annotations

import bisect
import itertools
from collections import Counter
from collections.abc import Callable
from functools import cached_property
from typing import Any

from ddpadvisor.evidence.trace.common import _odd_ranks
from ddpadvisor.evidence.trace.load import RankTrace, Record
from ddpadvisor.kb.model import KnowledgeBase
from ddpadvisor.kb.values import ValueProblem
from ddpadvisor.observation import Observation, observe


class _Facts:
    """Collects observations for facts the KB knows, one per fact."""

    def __init__(self, kb: KnowledgeBase) -> None:
        self.kb = kb
        self.out: dict[str, Observation] = {}
        self.warnings: list[str] = []

    def add(
        self, fact: str, value: Any, where: str | None = None, detail: str | None = None
    ) -> None:
        spec = self.kb.facts.get(fact)
        if spec is None or value is None:
            return
        # The reader computes numbers; give them the fact's shape before the one typing check.
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if spec.type == "bool":
                value = bool(value)
            elif spec.type == "int":
                value = int(value)
            elif spec.type == "float":
                value = round(float(value), 4)
        try:
            obs = observe(self.kb, fact, value, "trace", where, detail)
        except ValueProblem as exc:
            self.warnings.append(f"trace: {exc}; not used")
            return
        if obs is not None:
            self.out[fact] = obs


class Context:
    """What every topic reader sees: the ranks' traces, the world size and the facts."""

    def __init__(self, ranks: list[RankTrace], world: int, facts: _Facts) -> None:
        self.ranks = ranks
        self.world = world
        self.facts = facts
        self.by_rank = {t.rank: t for t in ranks}
        self.r0 = ranks[0]
        self.common_steps = sorted(set.intersection(*(set(t.steps) for t in ranks)))
        self.ddp = any(t.first("wrap") for t in ranks)
        self.accum = 1

    def add(self, *args: Any, **kwargs: Any) -> None:
        self.facts.add(*args, **kwargs)

    @cached_property
    def counted_outside_ddp(self) -> int:
        """With a DDP wrapper: how many parameters the counted optimizer steps when no DDP
        wrapper holds any of them, at every check of rank 0 (``outside``); 0 otherwise."""
        if not self.ddp:
            return 0
        t = self.r0
        pairs = [
            rec["outside"]
            for rec in [*t.checks.values(), *([t.final] if t.final else [])]
            if isinstance(rec.get("outside"), list) and len(rec["outside"]) == 2
        ]
        if pairs and all(isinstance(n, int) and n == total and total > 0 for n, total in pairs):
            return int(pairs[0][1])
        return 0

    @cached_property  # several readers ask; the ranks' records do not change while read
    def sharded(self) -> bool:
        """Some rank holds only a shard of some parameter (FSDP)."""
        records = [r for t in self.ranks for r in [*t.checks.values(), t.final] if r]
        return any(r.get("sharded") for r in records)

    @cached_property
    def deepspeed(self) -> Record | None:
        """The first DeepSpeed engine some rank built (its ``ds`` record), or None."""
        return next((r for t in self.ranks for r in t.kind("ds")), None)

    @cached_property
    def nothing_syncs(self) -> bool:
        """No DDP wrap, no shard, no DeepSpeed engine (it reduces gradients through its own
        communication layer, which the agent does not count) and not one large collective in
        any traced step, by an agent that counts them (format 3): the ranks trained
        unconnected copies."""
        if self.world < 2 or not self.r0.steps or self.ddp or self.sharded or self.deepspeed:
            return False
        if any(int(t.start.get("v") or 1) < 3 for t in self.ranks):
            return False  # an older agent did not count collectives outside DDP
        return not any(r.get("bigcol") for t in self.ranks for r in t.steps.values())

    def _cfg(self) -> list[Record]:
        return [r for t in self.ranks for r in t.kind("cfg")]

    @staticmethod
    def _last_synced(rec: Record | None) -> bool:
        syn = (rec or {}).get("syn") or []
        return bool(syn) and bool(syn[-1])

    def _compare_per_step(
        self,
        fact: str,
        read: Callable[[Record], Any],
        describe: Callable[[dict[int, Any], list[int], int], str],
        usable: Callable[[int], bool] = lambda s: True,
    ) -> None:
        """``fact`` is false at the first common step where a rank's value stands out, true
        when every compared step agrees; steps where a rank has no value are skipped."""
        compared = 0
        for s in self.common_steps:
            if not usable(s):
                continue
            values = {t.rank: read(t.steps[s]) for t in self.ranks}
            if any(v is None for v in values.values()):
                continue
            compared += 1
            odd = _odd_ranks(values)
            if odd:
                self.add(
                    fact, False, where=f"rank {odd[0]} step {s}", detail=describe(values, odd, s)
                )
                return
        if compared:
            self.add(fact, True, detail=f"equal at {compared} steps")

    @staticmethod
    def _train_sampler(t: RankTrace) -> int | None:
        """The sampler whose epochs saw the optimizer steps (eval loaders see none): the steps
        taken after an iteration began, before the next began and, where the iteration ran
        out, before it did. With none seeing a step, a loader read out whole before the first
        step (a list of batches made up front) is the training's; one iterated only later (an
        evaluation) is not, and then no sampler is known to feed the training."""
        score: Counter[int] = Counter()
        epochs = sorted(t.epochs, key=lambda e: e.get("it", 0))
        order = sorted(t.steps)
        last_step = order[-1] if order else 0
        first_step = order[0] if order else 0
        # the agent's clock at each step (steps are written in time order): the last step
        # taken before an iteration ran out is found by bisection, not by a scan per epoch
        times = list(itertools.accumulate((_clock(t.steps[s].get("t")) for s in order), max))
        for i, ep in enumerate(epochs):
            begin = int(ep.get("s") or 0)
            end = int(epochs[i + 1].get("s", last_step) if i + 1 < len(epochs) else last_step)
            ran_out = ep.get("end_t")
            if isinstance(ran_out, (int, float)):
                lo = bisect.bisect_right(order, begin)
                hi = bisect.bisect_right(order, end)
                cut = bisect.bisect_right(times, float(ran_out), lo, hi)
                seen = cut - lo
            else:
                seen = max(0, end - begin)
            score[int(ep.get("sampler", 0))] += seen
        if not score:
            return None
        if max(score.values()) == 0:
            early = [e for e in epochs if int(e.get("s") or 0) < first_step]
            if not early:
                return None
            return max(
                {int(e.get("sampler", 0)) for e in early},
                key=lambda k: sum(len(e["indices"]) for e in early if e.get("sampler") == k),
            )
        return max(score, key=lambda k: score[k])


def _clock(value: object) -> float:
    """A record's time on the agent's clock; one without a time counts as before any end."""
    return float(value) if isinstance(value, (int, float)) else float("-inf")

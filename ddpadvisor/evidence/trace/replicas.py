"""Replicas compared across ranks: parameters, optimizer state, gradients, buffers."""

from __future__ import annotations

from typing import Any

from ddpadvisor.evidence.trace.common import _odd_ranks, _ranks_text
from ddpadvisor.evidence.trace.context import Context
from ddpadvisor.evidence.trace.load import Record


class ReplicasReader(Context):
    """Replicas compared across ranks: parameters, optimizer state, gradients, buffers."""

    def _compare(
        self, checks: dict[int, dict[int, Record]], cat: str
    ) -> tuple[int, dict[str, Any] | None]:
        """(number of steps compared, first difference) for one fingerprint category."""
        compared = 0
        for step in sorted(checks):
            per_rank = checks[step]
            if len(per_rank) < 2:
                continue
            if cat == "optim" and any(r.get("optim_partitioned") for r in per_rank.values()):
                continue  # each rank holds the state of its own partition (ZeRO-1)
            # A shard (FSDP) exists once, on one rank: there is no replica to compare it with.
            sharded = {n for r in per_rank.values() for n in r.get("sharded") or []}
            tables = {}
            for rank, rec in per_rank.items():
                names = rec.get(cat + "_names")
                values = rec.get(cat)
                if not isinstance(names, list) or not isinstance(values, list):
                    continue
                tables[rank] = {n: v for n, v in zip(names, values) if n not in sharded}
            if len(tables) < 2 or not any(tables.values()):
                continue
            compared += 1
            names_all = list(dict.fromkeys(n for tab in tables.values() for n in tab))
            diffs = []
            for name in names_all:
                values = {rank: tab.get(name) for rank, tab in tables.items()}
                odd = _odd_ranks(values)
                if odd:
                    diffs.append((name, odd))
            if diffs:
                return compared, {"step": step, "diffs": diffs}
        return compared, None

    def _aux_models(self, checks: dict[int, dict[int, Record]]) -> None:
        """frozen_models_match: the models every rank's training forward ran beside the wrapped
        one, held by no wrapper and stepped by no counted optimizer (``aux``: a teacher, a
        reference model, a frozen encoder), compared where every rank ran them."""
        compared = 0
        for step in sorted(checks):
            tables = {}
            for rank, rec in checks[step].items():
                names, values = rec.get("aux_names"), rec.get("aux")
                if isinstance(names, list) and isinstance(values, list):
                    tables[rank] = dict(zip(names, values, strict=False))
            if len(tables) < len(self.ranks):
                continue
            common = set.intersection(*(set(t) for t in tables.values()))
            if not common:
                continue
            compared += 1
            for name in sorted(common, key=list(tables[self.r0.rank]).index):
                odd = _odd_ranks({r: t[name] for r, t in tables.items()})
                if odd:
                    model = name.split(".")[1] if name.count(".") >= 2 else name
                    self.add(
                        "frozen_models_match",
                        False,
                        where=f"rank {odd[0]} step {step}",
                        detail=f"{model}, which every rank's training forward runs but no DDP "
                        f"wrapper holds and no optimizer steps, has different weights on "
                        f"{_ranks_text(odd)} at step {step} ({name.split('.', 2)[-1]})",
                    )
                    return
        if compared:
            self.add(
                "frozen_models_match",
                True,
                detail=f"identical on every rank at {compared} checked steps",
            )

    def _checks_at_common_steps(self, source: str) -> dict[int, dict[int, Record]]:
        out: dict[int, dict[int, Record]] = {}
        for t in self.ranks:
            table = getattr(t, source)
            for step, rec in table.items():
                out.setdefault(step, {})[t.rank] = rec
        finals = {t.rank: t.final for t in self.ranks if t.final is not None}
        if source == "checks" and len(finals) == len(self.ranks):
            steps = {rec.get("s") for rec in finals.values()}
            if len(steps) == 1:
                step = steps.pop()
                if isinstance(step, int) and step not in out:
                    out[step] = dict(finals)
        return {s: v for s, v in out.items() if len(v) == len(self.ranks)}

    def _describe(self, diff: dict[str, Any], what: str) -> tuple[str, str]:
        name, odd = diff["diffs"][0]
        more = len(diff["diffs"]) - 1
        where = f"rank {odd[0]} step {diff['step']}"
        detail = f"{what} at step {diff['step']}: {name} ({_ranks_text(odd)})"
        if more:
            detail += f" and {more} more tensor{'s' if more > 1 else ''}"
        return where, detail

    def _changed_before_any_step(self, diff: dict[str, Any], where: str) -> None:
        """Replicas of a DDP model that differ before any optimizer step ran: the wrapper
        broadcast rank 0's parameters when it was built, so something changed them on some
        ranks after the wrap (a state dict loaded, a callback writing weights in place,
        under a rank test). Said only where no recorded load decided it already."""
        if diff.get("step") != 0 or not self.ddp:
            return
        if "rank_conditional_state_change" in self.facts.out:
            return
        # a parameter the wrapper does not hold (added after it was built) was never broadcast
        unreduced = {
            n for t in self.ranks for rec in t.checks.values() for n in rec.get("unreduced") or []
        }
        held = [(n, odd) for n, odd in diff["diffs"] if n not in unreduced]
        if not held:
            return
        name, odd = held[0]
        self.add(
            "rank_conditional_state_change",
            True,
            where=where,
            detail=f"the replicas already differed before the first optimizer step ({name}, "
            f"{_ranks_text(odd)}), after DistributedDataParallel had broadcast rank 0's "
            "parameters at wrapping: the weights were changed on some ranks after the wrap",
        )

    def replicas(self) -> None:
        if len(self.ranks) < 2:
            return
        checks = self._checks_at_common_steps("checks")
        if checks:
            for cat, fact, what in (
                ("params", "param_checksums_match", "replicas diverged"),
                ("optim", "optimizer_state_match", "optimizer state diverged"),
            ):
                n, diff = self._compare(checks, cat)
                if diff:
                    where, detail = self._describe(diff, what)
                    self.add(fact, False, where=where, detail=detail)
                    if cat == "params":
                        self._changed_before_any_step(diff, where)
                elif n:
                    self.add(fact, True, detail=f"identical on every rank at {n} checked steps")
            self._aux_models(checks)
            synced_steps = {
                s: v
                for s, v in checks.items()
                if all(self._last_synced(t.steps.get(s)) for t in self.ranks)
            }
            n, diff = self._compare(synced_steps, "grads")
            if diff:
                where, detail = self._describe(
                    diff, "gradients differ after a synchronising backward"
                )
                self.add("grads_match_after_sync", False, where=where, detail=detail)
            elif n:
                self.add("grads_match_after_sync", True, detail=f"identical at {n} checked steps")
            counts = [
                int(rec.get("n_unreduced") or 0) for per in checks.values() for rec in per.values()
            ]
            names = [
                n
                for per in checks.values()
                for rec in per.values()
                for n in rec.get("unreduced") or []
            ]
            if counts:
                worst = max(counts)
                note = None
                if worst:
                    shown = ", ".join(list(dict.fromkeys(names))[:3])
                    note = f"{worst} trainable parameter(s) are not in DDP's reducer: {shown}"
                self.add("params_not_in_reducer", worst, detail=note)
        bufs = self._checks_at_common_steps("bufchecks")
        n, diff = self._compare(bufs, "buffers")
        if diff:
            where, detail = self._describe(diff, "buffers differ across ranks")
            self.add("buffer_checksums_match", False, where=where, detail=detail)
        elif n:
            self.add("buffer_checksums_match", True, detail=f"identical at {n} checked steps")

"""The loss curve and what the user looks at (logging)."""

from __future__ import annotations

import math
import statistics

from ddpadvisor.evidence.trace.common import _fmt, _step_loss
from ddpadvisor.evidence.trace.context import Context
from ddpadvisor.evidence.trace.printed import PrintedLoss, read_printed, verdict


class LossesReader(Context):
    """The loss curve and what the user looks at (logging)."""

    def losses(self) -> None:
        steps = self.common_steps
        per_rank = {t.rank: [_step_loss(t.steps[s]) for s in steps] for t in self.ranks}
        curve = []
        for i in range(len(steps)):
            present = [v for r in per_rank if (v := per_rank[r][i]) is not None]
            curve.append(sum(present) / len(present) if present else None)
        stats = []
        for r, values in sorted(per_rank.items()):
            finite = [v for v in values if v is not None and math.isfinite(v)]
            if len(finite) >= 2:
                stats.append(
                    f"rank {r}: mean {_fmt(statistics.fmean(finite))}, sd {_fmt(statistics.stdev(finite))}"
                )
        if len(self.ranks) >= 2 and len(steps) >= 3:
            equal = 0
            compared = 0
            for i in range(len(steps)):
                row = [per_rank[r][i] for r in per_rank]
                vals = [v for v in row if v is not None]
                if len(vals) < len(row):
                    continue
                compared += 1
                if all(abs(v - vals[0]) <= 1e-6 * max(1.0, abs(vals[0])) for v in vals):
                    equal += 1
            if compared >= 3:
                identical = equal >= 0.9 * compared
                self.add(
                    "rank_losses_identical",
                    identical,
                    detail=(f"identical at {equal} of {compared} steps; " if identical else "")
                    + "per-rank loss: "
                    + "; ".join(stats),
                )
        pattern, where, detail = _loss_pattern(steps, curve)
        if pattern:
            self.add("loss_pattern", pattern, where=where, detail=detail)
        if pattern == "spikes" and len(self.ranks) >= 2:
            single = self._single_rank_spike(steps, per_rank, _spike_indices(curve))
            self.add(
                "loss_spike_single_rank",
                single is not None,
                where=f"rank {single[0]} step {single[1]}" if single else None,
                detail=f"at the spike of step {single[1]} rank {single[0]}'s loss stands far above "
                "the others"
                if single
                else None,
            )

    def _printed(self) -> bool:
        """The facts rank 0's printed numbers decide (True when they decided the log's reading,
        so the weaker count of loss reads and reductions is not needed)."""
        p = read_printed(self.ranks)
        if p is None:
            return False
        v = verdict(p)
        w = self.world
        if v["reduction"] == "summed":
            self.add(
                "logged_loss_reduction_wrong",
                True,
                detail=_printed_detail(
                    p, "sum", f"the sum of the {w} ranks' losses, not their mean"
                ),
            )
            self.add(
                "logged_loss_off_by_factor",
                True,
                detail=f"the printed loss is the ranks' sum: {w} times the mean",
            )
        elif v["reduction"] == "divided":
            self.add(
                "logged_loss_reduction_wrong",
                True,
                detail=_printed_detail(
                    p, "divided", "the loss still divided by the accumulation steps"
                ),
            )
            self.add(
                "logged_loss_off_by_factor",
                True,
                detail="the printed loss is the value passed to backward, divided for accumulation",
            )
        if v["logs_rank0_only"] is True:
            self.add(
                "logs_rank0_only",
                True,
                detail=_printed_detail(p, "own", "rank 0's own loss, not the mean over ranks"),
            )
        elif v["logs_rank0_only"] is False:
            self.add(
                "logs_rank0_only",
                False,
                detail=_printed_detail(p, "mean", "the mean over ranks"),
            )
        return v["logs_rank0_only"] is not None or v["reduction"] is not None

    @staticmethod
    def _single_rank_spike(
        steps: list[int], per_rank: dict[int, list[float | None]], spikes: list[int]
    ) -> tuple[int, int] | None:
        """A spike one rank's batch makes alone: at a spike of the mean curve, that rank's
        loss is over three times its own recent level (the median of its last ten steps)
        while every other rank stays near its own (under 1.5 times). Ranks are compared each
        with its own history, not with each other: batches differ in loss from rank to rank
        at any step, and a spike every rank shares (a rate too high) is no single batch's."""
        for i in spikes:
            elevated = []
            known = 0
            for r, values in per_rank.items():
                v = values[i]
                past = [x for x in values[max(0, i - 10) : i] if x is not None and math.isfinite(x)]
                if v is None or not math.isfinite(v) or len(past) < 3:
                    continue
                known += 1
                base = max(statistics.median(past), 1e-12)
                elevated.append((v / base, r))
            if known < 2:
                continue
            high = [r for ratio, r in elevated if ratio > 3]
            calm = [r for ratio, r in elevated if ratio < 1.5]
            if len(high) == 1 and len(calm) == known - 1:
                return high[0], steps[i]
        return None

    def logging(self) -> None:
        if not self.common_steps:
            return
        if self._printed():
            return
        reads = {
            t.rank: sum(int(r.get("lread") or 0) for r in t.steps.values()) for t in self.ranks
        }
        reductions = sum(int(r.get("red") or 0) for t in self.ranks for r in t.steps.values())
        if reductions:
            self.add(
                "logs_rank0_only",
                False,
                detail=f"{reductions} small all-reduce/gather calls reduce metrics across ranks",
            )
        elif reads.get(self.r0.rank):
            others = [r for r, n in reads.items() if r != self.r0.rank and n]
            self.add(
                "logs_rank0_only",
                True,
                detail="the loss is read on "
                + ("every rank" if others else f"rank {self.r0.rank} only")
                + " and never reduced across ranks: what rank 0 logs is its own micro-batch loss",
            )


def _printed_detail(p: PrintedLoss, key: str, what: str) -> str:
    n = {"mean": p.mean, "own": p.own, "sum": p.summed, "divided": p.divided}[key]
    return (
        f"{n} of the {p.prints} printed lines that show a loss show {what}, e.g. " + p.examples[key]
    )


def _spike_indices(curve: list[float | None]) -> list[int]:
    out = []
    for i, v in enumerate(curve):
        if v is None or i < 3 or not math.isfinite(v):
            continue
        before = [x for x in curve[max(0, i - 5) : i] if x is not None and math.isfinite(x)]
        after = [x for x in curve[i + 1 : i + 6] if x is not None and math.isfinite(x)]
        if len(before) < 3 or len(after) < 2:
            continue
        base = statistics.median(before)
        if v > 2.5 * max(base, 1e-12) and v > 2.5 * max(statistics.median(after), 1e-12):
            out.append(i)
    return out


def _loss_pattern(
    steps: list[int], curve: list[float | None]
) -> tuple[str | None, str | None, str | None]:
    """A conservative reading of the loss curve: only nan, diverges or spikes, when clear.
    Growth and spikes are ratios to the curve's own level, so they are read only on a curve
    that stays above zero: a policy-gradient or adversarial loss around zero (or below it)
    has no level to be a multiple of."""
    values = [v for v in curve if v is not None]
    if len(values) < 8:
        return None, None, None
    bad = [steps[i] for i, v in enumerate(curve) if v is not None and not math.isfinite(v)]
    if bad:
        return (
            "nan",
            f"step {bad[0]}",
            f"the loss became {'NaN' if any(math.isnan(v) for v in values) else 'inf'} at step {bad[0]}",
        )
    if min(values) <= 0:
        return None, None, None
    q = max(2, len(values) // 4)
    head, tail = statistics.fmean(values[:q]), statistics.fmean(values[-q:])
    if tail > 2 * max(head, 1e-12) and values[-1] > values[len(values) // 2]:
        return "diverges", f"step {steps[-1]}", f"the loss grew from {_fmt(head)} to {_fmt(tail)}"
    spikes = _spike_indices(curve)
    if spikes:
        at = [steps[i] for i in spikes]
        shown = ", ".join(map(str, at[:8]))
        return "spikes", f"step {at[0]}", f"loss spikes at steps {shown}"
    return None, None, None

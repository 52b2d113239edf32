"""Which loss rank 0 printed: its own, the mean over ranks, their sum, or one still divided.

The agent keeps the decimal numbers of every printed or logged line (``out`` records,
tracing/agent/.../hooks/output.py) with the step count at the time and the backwards already
run in the step under way. Each rank's micro-batch losses are in its step records (``loss``, as
passed to backward, and ``fac``, the constant factor applied just before: ``loss / k`` records
``fac`` 1/k; a DeepSpeed engine records the user's loss and its own division as ``fac``). A printed number is matched against what a loop commonly prints, computed from
those losses at the moment of the print: the last micro-batch's loss, the last step's mean, the
mean since the previous print, since the epoch began or since the start, each as rank 0's own
value, the mean over ranks or their sum, and the last loss as passed to backward (still divided
by the accumulation steps). A print counts for one reading only when the readings it matches
tell the cases apart (rank 0's own value and the mean over ranks must differ by more than the
printed precision).
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field
from typing import Any

from ddpadvisor.evidence.trace.load import RankTrace

REL_TOL = 2e-3  # float32 running sums and bf16 losses against the agent's float32 copies
MIN_PRINTS = 2  # prints that must agree before the log's reading is stated
MOST = 0.75  # the share of the competing prints a reading must hold to be stated


@dataclass
class PrintedLoss:
    """What rank 0's prints showed, counted per print, with one example of each."""

    prints: int = 0  # lines with a number that matched some reading of the loss
    mean: int = 0  # the mean over ranks (or a sum over ranks divided by the world size)
    own: int = 0  # rank 0's own loss only, distinguishable from the mean
    summed: int = 0  # the sum over ranks, never divided
    divided: int = 0  # the loss as passed to backward, still divided for accumulation
    examples: dict[str, str] = field(default_factory=dict)


def _flat(t: RankTrace, world: int) -> tuple[list[float], list[float], dict[int, int]]:
    """A rank's micro-batch losses in order (as the loop computed them, and as passed to
    backward), and how many there were once each step had ended."""
    raw: list[float] = []
    passed: list[float] = []
    ended: dict[int, int] = {0: 0}
    for s in sorted(t.steps):
        rec = t.steps[s]
        losses = rec.get("loss") or []
        facs = rec.get("fac") or []
        # A DeepSpeed engine's backward records the user's loss and, as the factor, the
        # engine's own division by its accumulation steps; a plain backward records the loss
        # as passed, after the loop's factor. Only a factor of 1 / (backwards in the window)
        # is an accumulation division the loop would undo to print, and so is a division by
        # the world size (made on the way to backward, the slip that DDP's averaging makes
        # twice: the mean over ranks of the loss before it equals the sum of the losses
        # after it, so a print of the former must not read as a sum); any other constant (a
        # token count, a temperature) is part of the loss it prints.
        engine = rec.get("ds") is not None
        window = len(losses)
        for i, v in enumerate(losses):
            if not isinstance(v, (int, float)) or not math.isfinite(v):
                v = math.nan
            f = facs[i] if i < len(facs) else None
            fac = float(f) if isinstance(f, (int, float)) and f != 0 and math.isfinite(f) else 1.0
            accumulation = (window > 1 and abs(fac * window - 1) < 1e-6) or (
                world > 1
                and not engine
                and any(abs(fac * world * k - 1) < 1e-6 for k in {1, window})
            )
            if engine:
                raw.append(float(v))
                passed.append(float(v) * fac if accumulation else float(v))
            else:
                passed.append(float(v))
                raw.append(float(v) / fac if accumulation else float(v))
        ended[s] = len(raw)
    return raw, passed, ended


def _shares_of_window(t: RankTrace) -> bool:
    """Whether each micro-batch's loss reaches backward as a share of its window's: several
    backwards per step, each after a constant factor that changes from step to step (a count
    of the window's tokens), never 1 nor 1/(backwards in the window)."""
    factors: set[float] = set()
    windows = 0
    for rec in t.steps.values():
        facs = rec.get("fac") or []
        losses = rec.get("loss") or []
        if len(losses) > 1:
            windows += 1
        for f in facs:
            if not isinstance(f, (int, float)) or not math.isfinite(f) or f <= 0:
                return False
            if abs(f - 1) < 1e-6 or (len(losses) > 1 and abs(f * len(losses) - 1) < 1e-6):
                return False
            factors.add(round(float(f), 12))
    return windows >= 2 and len(factors) >= 2


def _steps_within(ended: list[int], lo: int, hi: int) -> int:
    """How many steps ended within positions (lo, hi] of a rank's micro-batch losses."""
    return bisect.bisect_right(ended, hi) - bisect.bisect_right(ended, lo)


class _Sums:
    """Prefix sums of one rank's losses, so that a span's mean costs O(1) however many prints
    a long run made (a mean is None when the span holds a non-finite loss)."""

    def __init__(self, values: list[float]) -> None:
        self.total = [0.0]
        self.bad = [0]
        for v in values:
            finite = math.isfinite(v)
            self.total.append(self.total[-1] + (v if finite else 0.0))
            self.bad.append(self.bad[-1] + (0 if finite else 1))

    def mean(self, lo: int, hi: int) -> float | None:
        if hi <= lo or self.bad[hi] != self.bad[lo]:
            return None
        return (self.total[hi] - self.total[lo]) / (hi - lo)


def _close(printed: float, decimals: int, value: float) -> bool:
    tol = (0.5 * 10.0**-decimals if decimals >= 0 else 0.0) + REL_TOL * abs(value) + 1e-12
    return abs(printed - value) <= tol


def _nearest(
    value: float, decimals: int, kinds: list[tuple[str, list[tuple[str, float]]]]
) -> dict[str, tuple[str, float, float]]:
    """The readings a printed number is: of those within tolerance, the kinds whose closest
    candidate is as close as the best one to the printed precision. A loose match (a float32
    running sum, a bf16 loss) counts only where no reading fits the print exactly: over a run
    of prints some reading of another kind falls within the loose tolerance by chance."""
    unit = 0.5 * 10.0**-decimals if decimals >= 0 else 0.0
    best: dict[str, tuple[float, str, float]] = {}
    for kind, cands in kinds:
        for name, c in cands:
            if not _close(value, decimals, c):
                continue
            err = abs(value - c)
            if kind not in best or err < best[kind][0]:
                best[kind] = (err, name, c)
    if not best:
        return {}
    closest = min(err for err, _, _ in best.values())
    return {
        kind: (name, value, c)
        for kind, (err, name, c) in best.items()
        if err <= closest + unit + 1e-12
    }


def read_printed(ranks: list[RankTrace]) -> PrintedLoss | None:
    """Rank 0's prints against its own, the ranks' mean and summed losses (None: no prints,
    one rank, or losses not recorded on every rank)."""
    if len(ranks) < 2:
        return None
    r0 = ranks[0]
    outs = [r for r in r0.records if r.get("k") == "out" and isinstance(r.get("n"), list)]
    if not outs:
        return None
    flats = [_flat(t, len(ranks)) for t in ranks]
    if any(not raw for raw, _, _ in flats):
        return None
    world = len(ranks)
    raw0, passed0, ended0 = flats[0]
    prefix = [_Sums(raw) for raw, _, _ in flats]
    ended_positions = sorted(set(ended0.values()))
    shared = _shares_of_window(r0)
    epoch_starts = sorted(
        {ended0.get(int(e.get("s") or 0), -1) for e in r0.epochs if isinstance(e.get("s"), int)}
    )
    result = PrintedLoss()
    previous = 0
    for out in outs:
        s, b = out.get("s"), out.get("b") or 0
        if not isinstance(s, int) or s not in ended0 or not isinstance(b, int):
            continue
        pos = ended0[s] + b
        if pos <= 0 or any(pos > len(raw) for raw, _, _ in flats):
            continue
        last_step = (ended0.get(max((k for k in ended0 if k < s), default=0), 0), ended0[s])
        if b:
            last_step = (ended0[s], pos)
        spans = {
            "last": (pos - 1, pos),
            "step": last_step,
            "since the previous print": (previous, pos),
            "since the epoch began": (
                max((p for p in epoch_starts if 0 <= p < pos), default=0),
                pos,
            ),
            "since the start": (0, pos),
        }
        previous = pos
        candidates: dict[str, list[tuple[str, float]]] = {"own": [], "mean": [], "sum": []}
        divided: list[tuple[str, float]] = []
        for name, (lo, hi) in spans.items():
            if hi <= lo:
                continue
            per_rank = [sums.mean(lo, hi) for sums in prefix]
            if any(v is None for v in per_rank):
                continue
            vals = [float(v) for v in per_rank if v is not None]
            candidates["own"].append((name, vals[0]))
            candidates["mean"].append((name, sum(vals) / world))
            candidates["sum"].append((name, sum(vals)))
            # micro-batch losses that are shares of their window's (each divided by the
            # window's token count): a step's loss is their total, and the loop prints the
            # mean of those totals over its steps
            steps = _steps_within(ended_positions, lo, hi)
            if shared and steps and (hi - lo) > steps:
                totals = [v * (hi - lo) / steps for v in vals]
                candidates["own"].append((name + ", step totals", totals[0]))
                candidates["mean"].append((name + ", step totals", sum(totals) / world))
        if passed0[pos - 1] != raw0[pos - 1] and math.isfinite(passed0[pos - 1]):
            divided.append(("last, as passed to backward", passed0[pos - 1]))
        hits: dict[str, tuple[str, float, float]] = {}
        for pair in out["n"]:
            if not (isinstance(pair, list) and len(pair) == 2):
                continue
            value, decimals = pair
            if not isinstance(value, (int, float)) or not isinstance(decimals, int):
                continue
            if decimals == 0 or not math.isfinite(value) or value == 0:
                continue
            found = _nearest(float(value), decimals, [*candidates.items(), ("divided", divided)])
            for kind, hit in found.items():
                hits.setdefault(kind, hit)
            if "own" in hits and "mean" not in hits:
                # rank 0's own value counts only where the mean over ranks differs from it
                # by more than the printed precision
                name = hits["own"][0]
                mean_c = dict(candidates["mean"]).get(name)
                if mean_c is not None and _close(value, decimals, mean_c):
                    del hits["own"]
        if not hits:
            continue
        result.prints += 1
        if "mean" in hits:
            result.mean += 1
            result.examples.setdefault("mean", _example(s, hits["mean"]))
        elif "own" in hits:
            result.own += 1
            result.examples.setdefault("own", _example(s, hits["own"]))
        elif "sum" in hits:
            result.summed += 1
            result.examples.setdefault("sum", _example(s, hits["sum"]))
        elif "divided" in hits:
            result.divided += 1
            result.examples.setdefault("divided", _example(s, hits["divided"]))
    return result if result.prints else None


def _example(step: int, hit: tuple[str, float, float]) -> str:
    name, printed, value = hit
    return f"{printed:.6g} printed at step {step} ({name}: {value:.6g})"


def verdict(p: PrintedLoss) -> dict[str, Any]:
    """The facts the prints decide: keys ``logs_rank0_only`` and ``reduction`` ("summed",
    "divided" or None), each None when the prints do not decide it."""
    out: dict[str, Any] = {"logs_rank0_only": None, "reduction": None}
    if _most(p.own, p.own + p.mean + p.summed):
        out["logs_rank0_only"] = True
    elif _most(p.mean, p.own + p.mean):
        out["logs_rank0_only"] = False
    if _most(p.summed, p.summed + p.mean):
        out["reduction"] = "summed"
    elif _most(p.divided, p.divided + p.mean + p.own):
        out["reduction"] = "divided"
    return out


def _most(count: int, among: int) -> bool:
    """A reading decides when at least MIN_PRINTS prints show it and they are at least
    MOST of the prints it competes with: a print a rival reading fits by chance (two numbers
    a few thousandths apart) does not cancel a whole log."""
    return count >= MIN_PRINTS and count >= MOST * among

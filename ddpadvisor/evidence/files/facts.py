"""Findings of attached files -> observations (source ``log``), and the reference comparison.

What each finding settles is said in its ``detail``; its ``where`` is ``file:line`` or
``file steps A-B``. Values the KB cannot take become warnings, never errors.
"""

from __future__ import annotations

import bisect
import math
import statistics
from typing import TYPE_CHECKING

from ddpadvisor.evidence.files import curve as cv
from ddpadvisor.evidence.files.found import Finding, Read

if TYPE_CHECKING:
    from ddpadvisor.kb.model import KnowledgeBase
    from ddpadvisor.observation import Gathered

EARLY_OVERFLOW_STEPS = 300  # overflows while the scale calibrates
PERSIST_PER_1000 = 1.0  # after calibration: more than one in 1000 steps keeps coming


def main_curve(read: Read) -> cv.Curve | None:
    """The run's curve: rank 0 (or no rank) first, then the longest."""
    curves = [c for c in read.curves if c.loss]
    if not curves:
        return None
    return max(curves, key=lambda c: (c.rank in (0, None), len(c.loss)))


def curve_findings(curve: cv.Curve, read: Read) -> None:
    pattern = cv.loss_pattern(curve)
    if pattern is not None:
        read.add("loss_pattern", pattern.value, pattern.where, pattern.detail)
        if pattern.only_early is not None and pattern.value in ("spikes", "oscillates"):
            read.add("noise_only_early", pattern.only_early, pattern.where, pattern.early_detail)
    elif (text := cv.steady(curve)) is not None:
        read.notes.append(
            f"{curve.file}: {text}, with no spike, plateau, divergence or NaN; the loss pattern is left to you"
        )
    elif curve.loss and len(curve.loss) < cv.MIN_POINTS:
        read.warnings.append(
            f"{curve.file}: only {len(curve.loss)} logged losses; too few to read a loss pattern from"
        )
    if curve.grad_norm:
        bad = [p for p in curve.grad_norm if not math.isfinite(p.value)]
        if bad:
            read.add(
                "grad_norm_nonfinite_logged",
                True,
                curve.where(bad[0].line),
                f"the logged grad_norm is {bad[0].value} at step {cv._num(bad[0].step)} ({len(bad)} of {len(curve.grad_norm)} values not finite)",
            )
        else:
            read.add(
                "grad_norm_nonfinite_logged",
                False,
                curve.span(curve.grad_norm),
                f"all {len(curve.grad_norm)} logged grad_norm values are finite",
            )
    warm = cv.warmup(curve) if curve.unit == "step" else None
    if warm is not None:
        read.add("warmup_steps", int(warm.steps), warm.where, warm.detail)
    eval_findings(curve, read)


EVAL_MIN_POINTS = 3  # evaluations needed to say whether the eval loss still falls
EVAL_FALL = 0.02  # the last evaluation at least 2% below the first: it falls


def eval_findings(curve: cv.Curve, read: Read) -> None:
    """Whether the evaluation loss still falls: yes when the last evaluation is ``EVAL_FALL``
    below the first and within ``EVAL_FALL`` of the lowest; no when it is not below the first
    (or not finite). A loss that fell and then rose again from its lowest, or fell by less
    than ``EVAL_FALL``, is left to the user."""
    pts = curve.eval_loss
    if len(pts) < EVAL_MIN_POINTS:
        return
    first, last = pts[0], pts[-1]
    span = curve.span(pts)
    if not math.isfinite(last.value):
        read.add(
            "eval_loss_falls",
            False,
            curve.where(last.line),
            f"the last logged eval loss is {last.value} ({curve.unit} {cv._num(last.step)})",
        )
        return
    if not math.isfinite(first.value) or first.value <= 0:
        return
    best = min((p for p in pts if math.isfinite(p.value)), key=lambda p: p.value)
    change = (last.value - first.value) / first.value
    text = (
        f"the eval loss goes from {first.value:.4g} ({curve.unit} {cv._num(first.step)}) to "
        f"{last.value:.4g} ({curve.unit} {cv._num(last.step)}) over {len(pts)} evaluations, "
        f"{change * 100:+.1f}%; its lowest {best.value:.4g} at {curve.unit} {cv._num(best.step)}"
    )
    if change <= -EVAL_FALL and last.value <= best.value * (1 + EVAL_FALL):
        read.add("eval_loss_falls", True, span, text)
    elif change >= 0:
        read.add("eval_loss_falls", False, span, text)
    elif change <= -EVAL_FALL:  # fell, then rose again from its lowest: neither answer fits
        read.notes.append(f"{curve.file}: {text}; whether it still falls is left to you")


def rank_findings(read: Read) -> None:
    """Per-rank logs (``[rankR]:`` prefixes): whether a spike stands on one rank alone. A log
    that prints the all-reduced loss on every rank shows every spike on every rank, so only a
    spike one rank shows and the others do not is read as such."""
    ranked = [c for c in read.curves if c.rank is not None and len(c.loss) >= cv.MIN_POINTS]
    if len(ranked) < 2:
        return
    by_rank = {c.rank: {p.step: p.value for p in c.loss if math.isfinite(p.value)} for c in ranked}
    alone: list[tuple[cv.Curve, cv.Point]] = []
    shared = 0
    for c in ranked:
        pts = [p for p in c.loss if math.isfinite(p.value)]
        ys = [p.value for p in pts]
        half = max(2, min(50, len(ys) // 25))
        smooth = cv._rolling_median(ys, half)
        sigma = cv._mad([y - m for y, m in zip(ys, smooth, strict=True)])
        for cluster in cv.spikes(pts, half, sigma):
            p = pts[cluster[0]]
            others = [by_rank[r].get(p.step) for r in by_rank if r != c.rank]
            others_known = [v for v in others if v is not None]
            if not others_known:
                continue
            level = smooth[cluster[0]]
            if all(v - level <= cv.SPIKE_RISE * abs(level) for v in others_known):
                alone.append((c, p))
            else:
                shared += 1
    if alone:
        c, p = alone[0]
        read.add(
            "loss_spike_single_rank",
            True,
            c.where(p.line),
            f"rank {c.rank}'s loss spikes to {p.value:.4g} at step {cv._num(p.step)} while the "
            f"other ranks' stay at their level ({len(alone)} such spike(s))",
        )
    elif shared:
        c = ranked[0]
        read.add(
            "loss_spike_single_rank",
            False,
            c.span(c.loss),
            f"every one of the {shared} spike(s) shows on all {len(ranked)} logged ranks",
        )


def overflow_findings(read: Read) -> None:
    curves = [c for c in read.curves if c.overflows or c.at_minimum]
    if not curves:
        return
    c = max(curves, key=lambda c: len(c.overflows) + len(c.at_minimum))
    first = (c.overflows or c.at_minimum)[0]
    n = len(c.overflows)
    if c.overflow_from == "scale":
        what = (
            f"the logged loss scale ({c.tags.get('loss_scale', 'loss scale')}) falls {n} time(s); "
            "each fall follows at least one overflow (a skipped step)"
        )
    else:
        what = f"{n} loss-scale overflow message(s) (skipped steps)"
    read.add(
        "loss_scale_overflow_logged",
        True,
        c.where(first[0]),
        what + (", and the loss scale reached its minimum" if c.at_minimum else ""),
    )
    if c.at_minimum:
        read.add(
            "loss_scale_overflow_persists",
            True,
            c.where(c.at_minimum[0][0]),
            "the log says the loss scale is already at its minimum",
        )
        return
    # a message before any step number counts as the first step's
    steps = [s or 0.0 for _, s in c.overflows] if c.unit == "step" else []
    end = c.last_step or max((p.step for p in c.loss), default=None)
    if not steps or end is None:
        return
    late = [s for s in steps if s > EARLY_OVERFLOW_STEPS]
    if late and end > EARLY_OVERFLOW_STEPS:
        rate = len(late) / max(1.0, end - EARLY_OVERFLOW_STEPS) * 1000
        if rate > PERSIST_PER_1000:
            read.add(
                "loss_scale_overflow_persists",
                True,
                c.where(c.overflows[-1][0]),
                f"{len(late)} overflow(s) after step {EARLY_OVERFLOW_STEPS}, {rate:.1f} per 1000 steps, the last at step {cv._num(late[-1])}",
            )
            return
    # falls of a logged scale are a lower bound (several overflows between two logged values
    # show as one fall): they show overflows that keep coming, never that they stopped
    if end >= EARLY_OVERFLOW_STEPS + 1000 and c.overflow_from == "message":
        read.add(
            "loss_scale_overflow_persists",
            False,
            c.where(c.overflows[-1][0]),
            f"{len(steps) - len(late)} of {len(steps)} overflow message(s) come before step "
            f"{EARLY_OVERFLOW_STEPS}; {len(late)} in the {cv._num(end - EARLY_OVERFLOW_STEPS)} "
            f"logged steps after (at most {PERSIST_PER_1000:g} per 1000 steps: the scale "
            "calibrated and then held)",
        )


def schedule_findings(reads: list[Read]) -> Read:
    """The configured warmup (a config, TrainingArguments or the script's flags) against the
    one the logged learning rate followed."""
    out = Read("schedule")
    configured = [
        f
        for r in reads
        if r.kind != "schedule"
        for f in r.findings
        if f.fact == "warmup_steps" and "learning rate" not in f.detail
    ]
    measured = [
        f
        for r in reads
        for f in r.findings
        if f.fact == "warmup_steps" and "learning rate rises" in f.detail
    ]
    if not configured or not measured:
        return out
    want, got = configured[-1], measured[-1]
    if want.value <= 0 or got.value <= 0:
        return out
    ratio = want.value / got.value
    if abs(ratio - 1) <= 0.2:
        out.add(
            "lr_follows_intended_schedule",
            True,
            got.where,
            f"the logged warmup ({got.value} steps) matches the configured {want.value} ({want.where}); only the warmup was checked",
        )
    else:
        out.add(
            "lr_follows_intended_schedule",
            False,
            got.where,
            f"the learning rate peaks at step {got.value}, the configuration says {want.value} warmup steps ({want.where})",
        )
        out.add(
            "scheduler_steps_per_optimizer_step",
            round(ratio, 3),
            got.where,
            f"configured warmup {want.value} / logged warmup {got.value}: the scheduler steps {ratio:.2g} times per logged optimizer step",
        )
    return out


# -- reference run ---------------------------------------------------------------------------------


def _axis(c: cv.Curve) -> tuple[str, list[tuple[float, float]]]:
    """(name, [(x, loss)]) on a scale two runs share: the epoch (samples seen / data set size)
    from the steps per epoch, else from fractional epochs logged beside the losses, else the
    step."""
    finite = [p for p in c.loss if math.isfinite(p.value)]
    if c.steps_per_epoch and c.unit == "step":
        start = finite[0].step if finite and finite[0].step <= 1 else 0.0
        return "epoch", [((p.step - start) / c.steps_per_epoch, p.value) for p in finite]
    by_step = {p.step: p.value for p in c.epoch}
    if len(set(by_step.values())) >= cv.MIN_POINTS // 2:
        pts = [(by_step[p.step], p.value) for p in finite if p.step in by_step]
        if len(pts) >= len(finite) * 0.9:
            return "epoch", pts
    return "step", [(p.step, p.value) for p in finite]


def _binned(points: list[tuple[float, float]], bins: int = 50) -> list[tuple[float, float]]:
    """Medians over equal stretches of x: per-step noise of small batches would otherwise
    decide a ratio between two runs point by point."""
    points = sorted(points)
    if len(points) <= bins * 2:
        return points
    size = len(points) / bins
    out = []
    for b in range(bins):
        chunk = points[int(b * size) : int((b + 1) * size)]
        if chunk:
            out.append(
                (statistics.median(x for x, _ in chunk), statistics.median(y for _, y in chunk))
            )
    return out


def _interp(xs: list[float], ys: list[float], x: float) -> float | None:
    if not xs or x < xs[0] or x > xs[-1]:
        return None
    i = bisect.bisect_left(xs, x)
    if xs[i] == x or i == 0:
        return ys[i]
    x0, x1, y0, y1 = xs[i - 1], xs[i], ys[i - 1], ys[i]
    return y0 + (y1 - y0) * (x - x0) / (x1 - x0)


def compare(
    run: cv.Curve, ref: cv.Curve, world: int | None, accum: int | None, ref_name: str
) -> Read:
    out = Read("reference")
    rs, rr = run.steps_per_epoch, ref.steps_per_epoch
    if rs and rr:
        ratio = rr / rs
        if ratio >= 1.5:
            # one optimizer step takes one global batch: over the same data, sharded across the
            # ranks (the epoch got shorter), the steps an epoch takes in each run give the ratio
            # of their global batches, whatever split them into per-GPU batches, ranks and
            # accumulation. An unchanged epoch says nothing of it: every rank may be reading
            # the whole data set (no sampler) or a per-GPU batch divided by the world size.
            out.add(
                "global_batch_ratio",
                round(ratio, 2),
                run.file,
                f"an epoch takes {rs:.0f} optimizer steps here and {rr:.0f} in the reference run {ref_name}: the global batch is {ratio:.3g}x the reference's (both reading the same data)",
            )
        if 0.9 <= ratio <= 1.1 and world and world > 1:
            out.add(
                "epoch_steps_unchanged",
                True,
                run.file,
                f"an epoch takes {rs:.0f} steps on {world} GPUs and {rr:.0f} in the reference run {ref_name} (unless the per-GPU batch was divided by {world})",
            )
        elif ratio >= 1.5:
            out.add(
                "epoch_steps_unchanged",
                False,
                run.file,
                f"an epoch takes {rs:.0f} steps, {ratio:.2g}x fewer than the {rr:.0f} of the reference run {ref_name}",
            )
    axis_run, pr = _axis(run)
    axis_ref, pf = _axis(ref)
    axis = axis_run if axis_run == axis_ref else "step"
    if axis != axis_run:
        pr = [(p.step, p.value) for p in run.loss if math.isfinite(p.value)]
    if axis != axis_ref:
        pf = [(p.step, p.value) for p in ref.loss if math.isfinite(p.value)]
    pr = _binned(pr)
    pf = _binned(pf)
    pf.sort()
    xs, ys = [x for x, _ in pf], [y for _, y in pf]
    ratios = [(x, y / r) for x, y in pr if (r := _interp(xs, ys, x)) not in (None, 0.0)]
    if len(ratios) >= 10:
        k = max(3, len(ratios) // 10)
        r0 = statistics.median(q for _, q in ratios[:k])
        spread = statistics.median(abs(q - r0) for _, q in ratios) / r0 if r0 else 1.0
        span = f"{run.file} {axis}s {cv._num(ratios[0][0])}-{cv._num(ratios[-1][0])}"
        if (r0 >= 1.8 or r0 <= 0.55) and spread < 0.15:
            which = ""
            for name, n in (("the world size", world), ("the accumulation count", accum)):
                if n and n > 1 and (abs(r0 - n) / n < 0.1 or abs(1 / r0 - n) / n < 0.1):
                    which = f", about {name} ({n})"
            out.add(
                "logged_loss_off_by_factor",
                True,
                span,
                f"the logged loss is {r0:.3g}x the reference's {ref_name} at the same {axis}s, throughout (spread {spread * 100:.0f}%){which}",
            )
        elif 0.8 <= r0 <= 1.25:
            out.add(
                "logged_loss_off_by_factor",
                False,
                span,
                f"the logged loss starts at {r0:.3g}x the reference's {ref_name} at the same {axis}s",
            )
            late = statistics.median(q for _, q in ratios[-max(3, len(ratios) * 3 // 10) :])
            own = cv.loss_pattern(run)
            if late > 1.1 and (own is None or own.value in ("oscillates", "plateau")):
                out.add(
                    "loss_pattern",
                    "worse_than_reference",
                    span,
                    f"over the last 30% of the common {axis}s the loss is {late:.3g}x the reference's {ref_name}",
                )
    if world and world > 1 and run.lr and ref.lr:
        a = max(p.value for p in run.lr if math.isfinite(p.value))
        b = max(p.value for p in ref.lr if math.isfinite(p.value))
        if a > 0 and b > 0:
            q = a / b
            where = run.where(max(run.lr, key=lambda p: p.value).line)
            if abs(q - 1) < 0.05:
                out.add(
                    "lr_scaling",
                    "none",
                    where,
                    f"peak learning rate {a:.3g}, as in the reference {ref_name}",
                )
            elif abs(q - world) / world < 0.05:
                out.add(
                    "lr_scaling",
                    "linear",
                    where,
                    f"peak learning rate {a:.3g} = {q:.3g}x the reference's {b:.3g}: scaled by the world size {world}",
                )
            elif abs(q - math.sqrt(world)) / math.sqrt(world) < 0.05:
                out.add(
                    "lr_scaling",
                    "sqrt",
                    where,
                    f"peak learning rate {a:.3g} = {q:.3g}x the reference's {b:.3g}: scaled by sqrt({world})",
                )
    return out


def clean(text: str, limit: int = 400) -> str:
    """Text taken from a file, safe to print: control characters (escape sequences, carriage
    returns) become '?', and it is cut at ``limit`` characters."""
    out = "".join(ch if ch.isprintable() or ch == " " else "?" for ch in text[:limit])
    return out + ("..." if len(text) > limit else "")


def to_gathered(kb: KnowledgeBase, reads: list[Read]) -> Gathered:
    from ddpadvisor.kb.values import ValueProblem
    from ddpadvisor.observation import Gathered, UnknownFact, observe

    out = Gathered()
    for read in reads:
        out.warnings.extend(clean(w) for w in read.warnings)
        out.warnings.extend(clean(w) for w in read.notes)
        for f in read.findings:
            value = clean(f.value, 80) if isinstance(f.value, str) else f.value
            try:
                obs = observe(kb, f.fact, value, "log", clean(f.where), clean(f.detail))
            except UnknownFact:
                continue  # a fact this KB does not define
            except ValueProblem as exc:
                out.warnings.append(f"{f.where}: {f.fact} not read: {exc}")
                continue
            if obs is not None:
                out.observations.append(obs)
    return out


def findings_of(read: Read) -> list[Finding]:
    return read.findings

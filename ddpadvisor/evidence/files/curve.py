"""A logged run's series, and what robust statistics measure on its loss.

The loss pattern is read from the curve, never from the words around it. Every statistic is a
median or a median absolute deviation (MAD) over a rolling window, so one wild point moves
nothing but its own verdict (a spike): a spike is a point far above its neighbourhood's
median (more than ``SPIKE_SIGMAS`` robust deviations and ``SPIKE_RISE`` of the level) that the
curve comes back from; divergence is a late level well above the lowest level reached; a
plateau is a run whose late level is within ``PLATEAU_DROP`` of its early one; oscillation is
late noise above ``NOISE_LEVEL`` of the level. A change-point library (``ruptures``) would
find level shifts, but the patterns here are a handful of medians over windows, and the
standard library's ``statistics`` serves them without a dependency.
"""

from __future__ import annotations

import bisect
import itertools
import math
import statistics
from dataclasses import dataclass, field

MIN_POINTS = 20  # fewer logged losses say nothing about a pattern
SPIKE_SIGMAS = 6.0
SPIKE_RISE = 0.3  # a spike rises at least 30% above the local level
NOISE_LEVEL = 0.08  # late robust noise / late level above this: oscillates
PLATEAU_DROP = 0.05  # late level within 5% of the early level: plateau
DIVERGE_RISE = 1.5  # late level 1.5x the lowest level reached: diverges
EARLY_SHARE = 0.2  # "early": the first 20% of the logged steps
SWING_RHO = 0.3  # lag-1 autocorrelation of the deviations above which noise is a swing


@dataclass
class Point:
    step: float
    value: float
    line: int | None = None  # the line of the file it came from


@dataclass
class Curve:
    """One run's log as read: series by name, messages, and what the file says of the run."""

    file: str
    rank: int | None = None
    loss: list[Point] = field(default_factory=list)
    lr: list[Point] = field(default_factory=list)
    grad_norm: list[Point] = field(default_factory=list)
    epoch: list[Point] = field(default_factory=list)  # epoch (fractional) at a step
    eval_loss: list[Point] = field(default_factory=list)  # the evaluation's loss at a step
    loss_scale: list[Point] = field(default_factory=list)  # a logged AMP / DeepSpeed loss scale
    # (line, step or None) of each loss-scale overflow message, and of "at minimum" ones
    overflows: list[tuple[int, float | None]] = field(default_factory=list)
    at_minimum: list[tuple[int, float | None]] = field(default_factory=list)
    steps_per_epoch: float | None = None
    last_step: float | None = None
    # "step": the log numbers its optimizer steps; "entry": it does not (printed dicts, bare
    # "loss=X" lines), so points are counted log entries and no step count is read from them
    unit: str = "step"
    # how a point's ``line`` is cited: "file:12", or " record " for a binary file's records
    at: str = ":"
    # what the overflows are: "message"s a log printed, or falls of a logged loss "scale"
    overflow_from: str = "message"
    tags: dict[str, str] = field(default_factory=dict)  # series -> the logged name it came from

    def where(self, line: int | None) -> str:
        return f"{self.file}{self.at}{line}" if line else self.file

    def span(self, points: list[Point]) -> str:
        return f"{self.file} {self.unit}s {_num(points[0].step)}-{_num(points[-1].step)}"


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:.4g}"


@dataclass
class Pattern:
    value: str  # a value of the loss_pattern fact
    where: str
    detail: str
    only_early: bool | None = None  # noise_only_early, where the pattern bears on it
    early_detail: str = ""


def _window_medians(ys: list[float], width: int) -> list[float]:
    """The median of every full window ``ys[j : j + width]``, sliding a sorted copy (one
    insertion and one removal per step instead of a sort per window)."""
    if width <= 0 or len(ys) < width:
        return []
    window = sorted(ys[:width])
    mid = width // 2
    out = []
    for j in range(len(ys) - width + 1):
        out.append(window[mid] if width % 2 else (window[mid - 1] + window[mid]) / 2)
        if j + width < len(ys):
            del window[bisect.bisect_left(window, ys[j])]
            bisect.insort(window, ys[j + width])
    return out


def _rolling_median(ys: list[float], half: int) -> list[float]:
    """The median of each point's window of ``half`` points either side (cut at the ends)."""
    n = len(ys)
    full = _window_medians(ys, 2 * half + 1)
    out = []
    for i in range(n):
        if half <= i < n - half:
            out.append(full[i - half])
        else:
            out.append(statistics.median(ys[max(0, i - half) : min(n, i + half + 1)]))
    return out


def _mad(xs: list[float]) -> float:
    if not xs:
        return 0.0
    m = statistics.median(xs)
    return 1.4826 * statistics.median(abs(x - m) for x in xs)


def spikes(points: list[Point], half: int, sigma: float) -> list[list[int]]:
    """Clusters of consecutive indices far above the level both before and after them: the
    median of the ``half`` points before and of the ``half`` after (a steep fall at the start
    is above what follows but not above what came before). The first points, with nothing
    before them, and the last, with nothing after, are never spikes."""
    ys = [p.value for p in points]
    n = len(ys)
    trailing = _window_medians(ys, half)  # trailing[j]: median of ys[j : j + half]
    found: list[list[int]] = []
    for i in range(3, n - 1):
        before = trailing[i - half] if i >= half else statistics.median(ys[:i])
        after = trailing[i + 1] if i + 1 + half <= n else statistics.median(ys[i + 1 :])
        level = max(before, after)
        rise = ys[i] - level
        if rise > SPIKE_SIGMAS * sigma and rise > SPIKE_RISE * abs(level):
            if found and found[-1][-1] >= i - 1:
                found[-1].append(i)
            else:
                found.append([i])
    return found


def _level(ys: list[float]) -> tuple[int, list[float], float]:
    """The half-width of the rolling window, the rolling median (the local level) and the
    robust deviation around it, as every pattern below measures them."""
    half = max(2, min(50, len(ys) // 25))
    smooth = _rolling_median(ys, half)
    return half, smooth, _mad([y - s for y, s in zip(ys, smooth, strict=True)])


def spike_peaks(points: list[Point]) -> list[Point]:
    """The highest point of each spike :func:`loss_pattern` would find among the finite
    points (for a plot to mark them); none on a curve too short to say."""
    finite = [p for p in points if math.isfinite(p.value)]
    if len(finite) < MIN_POINTS:
        return []
    half, smooth, sigma = _level([p.value for p in finite])
    return [
        finite[max(c, key=lambda i: finite[i].value - smooth[i])]
        for c in spikes(finite, half, sigma)
    ]


def loss_pattern(curve: Curve) -> Pattern | None:
    """The loss_pattern value the curve shows, or None when it shows none of them (a loss
    that falls steadily) or is too short to say."""
    points = curve.loss
    bad = [p for p in points if not math.isfinite(p.value)]
    if bad:
        first = bad[0]
        return Pattern(
            "nan",
            curve.where(first.line),
            f"the logged loss is {first.value} at {curve.unit} {_num(first.step)} "
            f"({len(bad)} of {len(points)} logged values are not finite)",
        )
    if len(points) < MIN_POINTS:
        return None
    ys = [p.value for p in points]
    n = len(ys)
    half, smooth, sigma = _level(ys)
    k = max(3, n // 10)
    first_level = statistics.median(ys[:k])
    last_level = statistics.median(ys[-k:])
    low = min(smooth)
    span = curve.span(points)
    late = ys[n // 2 :]
    late_smooth = smooth[n // 2 :]
    late_noise = _mad([y - s for y, s in zip(late, late_smooth, strict=True)])
    late_level = abs(statistics.median(late_smooth)) or 1.0
    if ys[-1] > 10 * abs(first_level) > 0 or (
        last_level > DIVERGE_RISE * low
        and last_level - low > 3 * max(sigma, 1e-12)
        and last_level > 0.9 * first_level
    ):
        at = smooth.index(low)
        return Pattern(
            "diverges",
            span,
            f"the loss fell to {low:.4g} ({curve.unit} {_num(points[at].step)}) and then rose to "
            f"{last_level:.4g} over the last {k} logged steps (median)",
        )
    clusters = spikes(points, half, sigma)
    if clusters:
        early_cut = points[0].step + EARLY_SHARE * (points[-1].step - points[0].step)
        steps = [points[c[0]].step for c in clusters]
        early = all(s <= early_cut for s in steps)
        top = max(clusters, key=lambda c: max(ys[i] - smooth[i] for i in c))
        peak = max(top, key=lambda i: ys[i] - smooth[i])
        shown = ", ".join(_num(s) for s in steps[:6]) + (" ..." if len(steps) > 6 else "")
        return Pattern(
            "spikes",
            curve.where(points[peak].line),
            f"{len(clusters)} spike(s) at {curve.unit}(s) {shown}; the largest reaches "
            f"{ys[peak]:.4g} against a local level of {smooth[peak]:.4g}, and the loss "
            "comes back after each",
            only_early=early and last_level <= first_level,
            early_detail=(
                f"every spike lies in the first {int(EARLY_SHARE * 100)}% of the logged steps "
                f"(up to {curve.unit} {_num(early_cut)}) and the loss then falls from "
                f"{first_level:.4g} to {last_level:.4g}"
                if early
                else f"spikes continue after the first {int(EARLY_SHARE * 100)}% of the steps "
                f"({curve.unit} {_num(max(steps))})"
            ),
        )
    resid = [y - sm for y, sm in zip(ys, smooth, strict=True)]
    late_resid = resid[n // 2 :]
    ratio = late_noise / late_level
    rho = _lag1(late_resid)
    if ratio > NOISE_LEVEL and rho > SWING_RHO:
        return Pattern(
            "oscillates",
            span,
            f"over the second half of the run the loss swings by {ratio * 100:.0f}% of its "
            f"level ({late_level:.4g}) in runs of several steps (lag-1 autocorrelation "
            f"{rho:.2f} of its deviations from the rolling median)",
            only_early=False,
            early_detail="the swings go on through the second half of the logged steps",
        )
    cut = max(k, int(n * EARLY_SHARE))
    early_noise = _mad(resid[:cut])
    early_level = abs(statistics.median(smooth[:cut])) or 1.0
    quiet_late = ratio <= NOISE_LEVEL
    if (
        quiet_late
        and early_noise / early_level > 2 * NOISE_LEVEL
        and _lag1(resid[:cut]) > SWING_RHO
    ):
        return Pattern(
            "oscillates",
            curve.span(points[:cut]),
            f"the loss swings by {early_noise / early_level * 100:.0f}% of its level over the "
            f"first {cut} logged {curve.unit}s, then by {ratio * 100:.0f}%",
            only_early=True,
            early_detail=f"the swings settle after the first {cut} logged {curve.unit}s and "
            f"the loss falls from {first_level:.4g} to {last_level:.4g}",
        )
    drop = (first_level - last_level) / abs(first_level) if first_level else 0.0
    # the medians of k noisy points each: a drop within three of their standard errors is none
    noise = 3 * 1.77 * sigma / math.sqrt(k) / (abs(first_level) or 1.0)
    if n >= 30 and abs(drop) < max(PLATEAU_DROP, noise):
        return Pattern(
            "plateau",
            span,
            f"the loss stays near {first_level:.4g} (median of the first {k} logged "
            f"{curve.unit}s) to {last_level:.4g} (the last {k}): {drop * 100:+.1f}% change, "
            "within the noise",
        )
    return None


def _lag1(xs: list[float]) -> float:
    """Lag-1 autocorrelation: near 0 for batch-to-batch noise, high for swings that last
    several steps."""
    if len(xs) < 8:
        return 0.0
    m = statistics.fmean(xs)
    var = sum((x - m) ** 2 for x in xs)
    if var == 0:
        return 0.0
    return sum((a - m) * (b - m) for a, b in itertools.pairwise(xs)) / var


def steady(curve: Curve) -> str | None:
    """A sentence for a loss that falls without any pattern, or None."""
    pts = [p for p in curve.loss if math.isfinite(p.value)]
    if len(pts) < MIN_POINTS:
        return None
    k = max(3, len(pts) // 10)
    a = statistics.median(p.value for p in pts[:k])
    b = statistics.median(p.value for p in pts[-k:])
    return f"the loss falls from {a:.4g} to {b:.4g} over {curve.span(pts)[len(curve.file) + 1 :]}"


@dataclass
class Warmup:
    steps: float
    peak: float
    where: str
    detail: str


def warmup(curve: Curve) -> Warmup | None:
    """The warmup the logged learning rate followed: the step at which it first reaches its
    peak (a rise from a lower first value), or 0 when it starts at the peak."""
    pts = [p for p in curve.lr if math.isfinite(p.value)]
    if len(pts) < 3:
        return None
    peak = max(p.value for p in pts)
    if peak <= 0:
        return None
    top = next(p for p in pts if p.value >= 0.99 * peak)
    first = pts[0]
    if top is first:
        return Warmup(
            0,
            peak,
            curve.where(first.line),
            f"the learning rate starts at its peak {peak:.3g} (first logged at step "
            f"{_num(first.step)}): no warmup longer than the logging interval",
        )
    return Warmup(
        top.step,
        peak,
        curve.where(top.line),
        f"the learning rate rises from {first.value:.3g} (step {_num(first.step)}) to its "
        f"peak {peak:.3g} at step {_num(top.step)}",
    )

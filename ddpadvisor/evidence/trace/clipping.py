"""Gradient clipping and GradScaler state, compared step by step."""

from __future__ import annotations

import math
from typing import Any

from ddpadvisor.evidence.trace.common import _fmt, _ranks_text
from ddpadvisor.evidence.trace.context import Context


class ClippingReader(Context):
    """Gradient clipping and GradScaler state, compared step by step."""

    def clipping(self) -> None:
        if not self.common_steps:
            return
        clipped = any(r.get("clip") for t in self.ranks for r in t.steps.values())
        self.add("uses_grad_clipping", clipped)
        if not clipped:
            return
        # A clip followed by another backward before the optimizer step measured gradients that
        # were not final. (A clip after an unsynchronised last backward is the sync fault's.)
        inside = [
            (t.rank, r["s"])
            for t in self.ranks
            for r in t.steps.values()
            for ctx in r.get("cctx") or []
            if ctx[2]
        ]
        if inside:
            rank, step = inside[0]
            self.add(
                "clip_inside_no_sync",
                True,
                where=f"rank {rank} step {step}",
                detail="clip_grad_norm_ ran on gradients that were not yet all-reduced "
                f"(inside an accumulation window; first at step {step})",
            )
        elif self.ddp:
            self.add("clip_inside_no_sync", False)
        scaled = any(r.get("scaler") for r in self._cfg())
        if scaled:
            early = [
                (t.rank, r["s"])
                for t in self.ranks
                for r in t.steps.values()
                for ctx in r.get("cctx") or []
                if ctx[1]
            ]
            if early:
                rank, step = early[0]
                self.add(
                    "unscale_before_clip",
                    False,
                    where=f"rank {rank} step {step}",
                    detail="clip_grad_norm_ ran on scaled gradients: GradScaler.unscale_ was not "
                    "called first, so the threshold applies to loss-scaled norms",
                )
            else:
                self.add("unscale_before_clip", True)
        if len(self.ranks) < 2:
            return

        def clip_shown(values: dict[int, Any], odd: list[int], s: int) -> str:
            shown = ", ".join(
                f"{_fmt(v[0] if isinstance(v, list) and v else v)} on rank {r}"
                for r, v in sorted(values.items())
            )
            return f"clip_grad_norm_ returned {shown} at step {s}"

        self._compare_per_step(
            "clip_norms_match_across_ranks",
            # A norm the agent could not read (a DTensor's partial norm) is no measurement.
            read=lambda rec: (
                rec.get("clip") if any(v is not None for v in rec.get("clip") or []) else None
            ),
            describe=clip_shown,
            # Until the final gradients are all-reduced the norms differ for that reason alone.
            usable=lambda s: all(self._last_synced(t.steps[s]) for t in self.ranks),
        )

    def scaler(self) -> None:
        worst = (0, self.r0.rank, None)
        settling = 0
        for t in self.ranks:
            bad = []
            for r in (t.steps[s] for s in sorted(t.steps)):
                norms = [r.get("pre"), r.get("post")]
                nonfinite = any(isinstance(n, (int, float)) and not math.isfinite(n) for n in norms)
                if nonfinite or (isinstance(r.get("finf"), (int, float)) and r["finf"] > 0):
                    bad.append(r)
            start = _scale_settling(t, bad)
            settling = max(settling, start)
            bad = bad[start:]
            if len(bad) > worst[0]:
                worst = (len(bad), t.rank, bad[0]["s"])
        if self.common_steps:
            count, rank, first = worst
            settled = (
                f"; {settling} skipped step(s) at the start while the loss scale settled are not "
                "counted"
                if settling
                else ""
            )
            self.add(
                "nonfinite_grad_steps",
                count,
                where=f"rank {rank} step {first}" if count else None,
                detail=(
                    f"{count} optimizer step(s) had inf/NaN gradients (first: step {first})"
                    if count
                    else "no optimizer step had inf/NaN gradients"
                )
                + settled,
            )
        if len(self.ranks) < 2:
            return

        def scaler_shown(values: dict[int, Any], odd: list[int], s: int) -> str:
            shown = ", ".join(
                f"rank {r}: scale {_fmt(v[0])}, tracker {v[1]}" for r, v in sorted(values.items())
            )
            return f"scaler state differs on {_ranks_text(odd)} at step {s} ({shown})"

        self._compare_per_step(
            "scaler_state_match",
            read=lambda rec: (
                None if rec.get("scale") is None else [rec["scale"], rec.get("growth")]
            ),
            describe=scaler_shown,
        )


# A dynamic loss scaler starts high on purpose (GradScaler: init_scale 2**16) and halves the
# scale on each overflow, skipping that step, until the scale fits: a run of skips at the very
# start is how a healthy fp16 job begins (torch/amp/grad_scaler.py). Halving 2**16 this many
# times reaches 1; a longer run is not calibration.
SETTLING_SKIPS = 16


def _scale_settling(t: Any, bad: list[dict[str, Any]]) -> int:
    """How many of ``bad`` (in step order) are the scaler settling at the start of the run:
    the leading skipped steps with a recorded, falling loss scale, ended by a clean step."""
    order = sorted(t.steps)
    n = 0
    previous: float | None = None
    for s, rec in zip(order, bad):
        scale = _scale_value(rec.get("scale"))
        if rec["s"] != s or scale is None or (previous is not None and scale >= previous):
            break
        previous = scale
        n += 1
    if n == 0 or n > SETTLING_SKIPS or n >= len(order):
        return 0  # no scaler, too long to be calibration, or it never trained a clean step
    return n


def _scale_value(raw: Any) -> float | None:
    value = raw[0] if isinstance(raw, list) and raw else raw
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None

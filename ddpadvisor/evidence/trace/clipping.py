"""Gradient clipping and GradScaler state, compared step by step."""

from __future__ import annotations

import math
from typing import Any

from ddpadvisor.evidence.trace.common import _fmt, _ranks_text
from ddpadvisor.evidence.trace.context import Context

# The stepped gradients' norm against the all-reduced one: float32 sums agree to ~1e-6; a clip
# that changes the norm by less than this acted on nothing worth measuring.
NORM_RTOL = 1e-3


class ClippingReader(Context):
    """Gradient clipping and GradScaler state, compared step by step."""

    def clipping(self) -> None:
        if not self.common_steps:
            return
        clipped = any(r.get("clip") for t in self.ranks for r in t.steps.values())
        if not clipped:
            self._no_clip_call()
            return
        self.add("uses_grad_clipping", True)
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

    def _no_clip_call(self) -> None:
        """No clip call the agent patches: ``false`` only where the gradients show it.

        The agent records clipping through the APIs it patches (clip_grad_norm_,
        clip_grads_with_norm_, FSDP's method). A job that clips another way (its own loop
        over ``p.grad``, ``torch._foreach_mul_``, a framework's own clip) calls none of them.
        At a checked step the agent also fingerprints the gradients the optimizer stepped on;
        when their norm is the norm DDP's all-reduce produced, nothing rescaled them between
        backward and the step. ``false`` needs that at every such step (and at least one);
        otherwise the fact is left unknown with a note saying why. Blind spot: a clip by
        other means whose threshold no checked step reached acted on nothing the agent
        fingerprinted, and reads as false. Runs without DDP's all-reduce, or with a
        GradScaler (the stepped gradients are unscaled), have no norm to compare with and
        stay unknown."""
        why, proven = self._grads_untouched()
        if proven:
            self.add(
                "uses_grad_clipping",
                False,
                detail=f"no clip call, and at {proven} checked step(s) the gradients the "
                "optimizer stepped on had the norm DDP's all-reduce produced (nothing rescaled "
                "them)",
            )
            return
        self.facts.warnings.append(
            "trace: uses_grad_clipping not measured: no clip_grad_norm_ call was seen, but a "
            f"clip by other means (a loop over p.grad, torch._foreach_mul_) would not show; {why}"
        )

    def _grads_untouched(self) -> tuple[str, int]:
        """(why not, 0) or ("", number of checked steps whose stepped gradients kept the
        all-reduced norm)."""
        if not self.ddp:
            return "no DDP all-reduce was observed to compare the stepped gradients with", 0
        if any(r.get("scaler") for r in self._cfg()):
            return "with a GradScaler the stepped gradients are unscaled by a factor", 0
        if any(len(t.kind("wrap")) > 1 for t in self.ranks):
            return "several DDP models: one all-reduced norm does not cover them all", 0
        proven: set[int] = set()
        for t in self.ranks:
            for s, chk in sorted(t.checks.items()):
                rec = t.steps.get(max(s, 1))  # the check before the first step sees step 1's
                reduced = rec.get("post") if rec is not None else None
                rows = chk.get("grads")
                if (
                    rec is None
                    or rec.get("skip")
                    or not self._last_synced(rec)
                    or not isinstance(reduced, (int, float))
                    or not math.isfinite(reduced)
                    or reduced <= 0
                    or not isinstance(rows, list)
                    or not rows
                    or chk.get("unreduced")
                    or chk.get("sharded")
                ):
                    continue
                squares = [row[1] for row in rows if isinstance(row, list) and len(row) == 2]
                if len(squares) != len(rows) or not all(
                    isinstance(v, (int, float)) and math.isfinite(v) for v in squares
                ):
                    continue
                stepped = math.sqrt(sum(squares))
                if abs(stepped - reduced) > NORM_RTOL * reduced:
                    return (
                        f"at rank {t.rank} step {rec['s']} the gradients the optimizer stepped "
                        f"on had norm {_fmt(stepped)}, not the all-reduced {_fmt(reduced)}: "
                        "something rescaled them after backward",
                        0,
                    )
                proven.add(int(rec["s"]))
        if not proven:
            return "no checked step had both the all-reduced and the stepped gradient norms", 0
        return "", len(proven)

    def scaler(self) -> None:
        worst = (0, self.r0.rank, None)
        for t in self.ranks:
            bad = []
            for r in t.steps.values():
                norms = [r.get("pre"), r.get("post")]
                nonfinite = any(isinstance(n, (int, float)) and not math.isfinite(n) for n in norms)
                if nonfinite or (isinstance(r.get("finf"), (int, float)) and r["finf"] > 0):
                    bad.append(r["s"])
            if len(bad) > worst[0]:
                worst = (len(bad), t.rank, bad[0])
        if self.common_steps:
            count, rank, first = worst
            self.add(
                "nonfinite_grad_steps",
                count,
                where=f"rank {rank} step {first}" if count else None,
                detail=f"{count} optimizer step(s) had inf/NaN gradients (first: step {first})"
                if count
                else None,
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

"""Gradient clipping and GradScaler state, compared step by step."""

from __future__ import annotations

import math
from typing import Any

from ddpadvisor.evidence.trace.common import _finite, _fmt, _ranks_text
from ddpadvisor.evidence.trace.context import Context

# The stepped gradients' norm against the all-reduced one: float32 sums agree to ~1e-6; a clip
# that changes the norm by less than this acted on nothing worth measuring.
NORM_RTOL = 1e-3


def _before_any_backward(ctx: list[Any]) -> bool:
    """A clip before the window's first backward. Under DeepSpeed that is a clip after the
    engine's step: accelerate's ``backward`` runs ``engine.backward`` and ``engine.step``
    together (accelerate/utils/deepspeed.py, ``DeepSpeedEngineWrapper.backward``), so a clip
    in the loop after it lands in the next window, on gradients the step already consumed."""
    return len(ctx) > 3 and ctx[3] == 0


class ClippingReader(Context):
    """Gradient clipping and GradScaler state, compared step by step."""

    def clipping(self) -> None:
        if not self.common_steps:
            return
        clipped = any(r.get("clip") for t in self.ranks for r in t.steps.values())
        ds = self.deepspeed
        ds_clip = ds.get("clip") if ds is not None else None
        if not clipped and isinstance(ds_clip, (int, float)) and ds_clip > 0:
            # The engine clips inside its optimizer's step (ZeRO's unscale_and_clip_grads,
            # engine._take_model_step), through no torch entry point the agent patches.
            self.add(
                "uses_grad_clipping",
                True,
                detail=f"the DeepSpeed config sets gradient_clipping {_fmt(float(ds_clip))}",
            )
            return
        if not clipped:
            if ds is None:
                self._no_clip_call()
            return
        if ds is not None and self._ds_clip_found_no_grads(ds):
            return
        self.add("uses_grad_clipping", True)
        # A clip followed by another backward before the optimizer step measured gradients that
        # were not final. (A clip after an unsynchronised last backward is the sync fault's.)
        inside = [
            (t.rank, r["s"])
            for t in self.ranks
            for r in t.steps.values()
            for ctx in r.get("cctx") or []
            if ctx[2] and not (ds is not None and _before_any_backward(ctx))
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

    def _ds_clip_found_no_grads(self, ds: dict[str, Any]) -> bool:
        """A torch clip_grad_norm_ under a ZeRO engine, after the window's last backward (or
        after the engine's step, before the next window's first backward):
        ZeRO has moved the gradients into its own partitions by then (the module's ``.grad`` is
        None: stage_1_and_2.py clears it once reduced), so the call finds nothing, returns 0
        and clips nothing; only the config's gradient_clipping clips. True (and the clipping
        facts said) when every such call returned exactly 0."""
        if int(ds.get("stage") or 0) < 1:
            return False
        finals = [
            norm
            for t in self.ranks
            for r in t.steps.values()
            for norm, ctx in zip(r.get("clip") or [], r.get("cctx") or [])
            if isinstance(ctx, list) and len(ctx) > 2 and (not ctx[2] or _before_any_backward(ctx))
        ]
        if not finals or not all(_finite(n) for n in finals):
            return False
        if any(n != 0 for n in finals):
            self.add("ds_clip_found_no_grads", False)
            return False
        raw = ds.get("clip")
        config = float(raw) if isinstance(raw, (int, float)) else 0.0
        by_config = config > 0
        self.add(
            "ds_clip_found_no_grads",
            True,
            detail=f"clip_grad_norm_ returned 0 at all {len(finals)} calls after the last "
            f"backward of a window: under ZeRO stage {ds.get('stage')} the module's gradients "
            "are already in the engine's partitions, so it clipped nothing"
            + (
                f" (the config's gradient_clipping {_fmt(config)} does clip)"
                if by_config
                else "; the DeepSpeed config's gradient_clipping is 0: nothing clips"
            ),
        )
        self.add(
            "uses_grad_clipping",
            by_config,
            detail="the DeepSpeed config's gradient_clipping"
            if by_config
            else "the only clip call, torch's on the module, found no gradients under ZeRO",
        )
        return True

    def _no_clip_call(self) -> None:
        """No clip call the agent patches: ``false`` only where the gradients show it.

        The agent records clipping through the APIs it patches (clip_grad_norm_,
        clip_grads_with_norm_, FSDP's method). A job that clips another way (its own loop
        over ``p.grad``, ``torch._foreach_mul_``, a framework's own clip) calls none of them.
        At a checked step the agent also fingerprints the gradients the optimizer stepped on;
        when their norm is the norm DDP's all-reduce produced, nothing rescaled them between
        backward and the step. ``false`` needs that at every such step (and at least one);
        otherwise the fact is left unknown with a note saying why. With a GradScaler the
        comparison uses the loss scale of the step (steps whose scale just changed are not
        compared). Blind spot: a clip by other means whose threshold no checked step reached
        acted on nothing the agent fingerprinted, and reads as false. Runs without DDP's
        all-reduce (FSDP, a forward around the wrapper, every backward under no_sync) have
        no norm to compare with and stay unknown."""
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
        if any(len(t.kind("wrap")) > 1 for t in self.ranks):
            return "several DDP models: one all-reduced norm does not cover them all", 0
        scaled = any(r.get("scaler") for r in self._cfg())
        proven: set[int] = set()
        for t in self.ranks:
            for s, chk in sorted(t.checks.items()):
                rec = t.steps.get(max(s, 1))  # the check before the first step sees step 1's
                if rec is None or rec.get("skip") or not self._last_synced(rec):
                    continue
                reduced = _positive(rec.get("post"))
                stepped = _stepped_norm(chk)
                # GradScaler: DDP reduced scaled gradients, the optimizer stepped on unscaled
                # ones. The scale recorded is the one after update(): the one used unless it
                # just changed (an inf, or a growth: the tracker restarts at 0).
                factor: float | None = 1.0
                if scaled:
                    factor = _positive(_scalar(rec.get("scale")))
                    if _scalar(rec.get("finf")) != 0 or _scalar(rec.get("growth")) in (None, 0):
                        factor = None
                if reduced is None or stepped is None or factor is None:
                    continue
                if abs(stepped * factor - reduced) > NORM_RTOL * reduced:
                    return (
                        f"at rank {t.rank} step {rec['s']} the gradients the optimizer stepped "
                        f"on had norm {_fmt(stepped * factor)}"
                        + (" (times the loss scale)" if scaled else "")
                        + f", not the all-reduced {_fmt(reduced)}: something rescaled them "
                        "after backward",
                        0,
                    )
                proven.add(int(rec["s"]))
        if not proven:
            why = "no checked step had both the all-reduced and the stepped gradient norms"
            if scaled:
                why += " (with a GradScaler, at a step whose loss scale is known)"
            return why, 0
        return "", len(proven)

    def scaler(self) -> None:
        worst = (0, self.r0.rank, None)
        settling = probing = 0
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
            probes = _scale_probes(t, bad)
            probing = max(probing, len(probes))
            bad = [r for r in bad if r["s"] not in probes]
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
            if probing:
                settled += (
                    f"; {probing} lone skipped step(s) where the dynamic loss scale had climbed "
                    "back to (or past) where it last overflowed are the scaler probing, not "
                    "counted"
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


def _scale_probes(t: Any, bad: list[dict[str, Any]]) -> set[int]:
    """The steps of ``bad`` that are a dynamic loss scaler probing: it raises the scale after
    a run of clean steps until one overflows, skips that step and lowers the scale, so a
    healthy fp16 run skips a step now and then. A skip is a probe when the step before it was
    clean and the scale it used (the previous step's) had grown since the previous skip (or
    the start), or when it is the run's first, alone between clean steps (the initial scale
    tested for the first time); skips in a row, or a later one at a scale that never grew,
    are overflows of their own."""
    wanted = {r["s"] for r in bad}
    probes: set[int] = set()
    low: float | None = None  # the lowest scale since the previous skip (its own included)
    prev: dict[str, Any] | None = None
    order = sorted(t.steps)
    first_skip = True
    for i, s in enumerate(order):
        rec = t.steps[s]
        scale = _scale_value(rec.get("scale"))
        if s in wanted:
            used = _scale_value(prev.get("scale")) if prev is not None else None
            clean = prev is not None and _clean(prev)
            if clean and used is not None and low is not None and used > low:
                probes.add(s)
            elif (
                first_skip
                and all(_clean(t.steps[k]) for k in order[:i])
                and i + 1 < len(order)
                and _clean(t.steps[order[i + 1]])
            ):
                # the first overflow of the run, alone between clean steps: the initial scale
                # (2**16 on purpose) had never been tested, and gradients that grew in the
                # first steps test it now; the scaler halves it and goes on
                probes.add(s)
            first_skip = False
            low = scale
        elif scale is not None:
            low = scale if low is None else min(low, scale)
        prev = rec
    return probes


def _clean(rec: dict[str, Any]) -> bool:
    """A step the optimizer took with finite gradients (no skip, no inf found)."""
    return not rec.get("skip") and (_scalar(rec.get("finf")) or 0) <= 0


def _scale_value(raw: Any) -> float | None:
    value = raw[0] if isinstance(raw, list) and raw else raw
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def _scalar(value: Any) -> float | None:
    """A number the agent copied as is or as a one-element list (GradScaler state)."""
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _positive(value: Any) -> float | None:
    v = _scalar(value)
    return v if v is not None and math.isfinite(v) and v > 0 else None


def _stepped_norm(chk: dict[str, Any]) -> float | None:
    """The norm of the gradients a check fingerprinted, over DDP's reduced parameters only
    (a parameter added after wrapping is in no bucket); None when it cannot be read."""
    rows, names = chk.get("grads"), chk.get("grads_names")
    if not isinstance(rows, list) or not rows or chk.get("sharded"):
        return None
    unreduced = chk.get("unreduced") or []
    if len(unreduced) != int(chk.get("n_unreduced") or len(unreduced)):
        return None  # the list of parameters outside the buckets was cut short
    named: list[Any] = names if isinstance(names, list) else []
    if unreduced and len(named) != len(rows):
        return None
    skip = set(unreduced)
    total = 0.0
    for i, row in enumerate(rows):
        if not (isinstance(row, list) and len(row) == 2):
            return None
        if skip and named[i] in skip:
            continue
        square = row[1]
        if isinstance(square, bool) or not isinstance(square, (int, float)):
            return None
        if not math.isfinite(square):
            return None
        total += square
    return math.sqrt(total)

"""Accumulation, loss scaling and zero_grad between micro-batches."""

from __future__ import annotations

import json

from ddpadvisor.evidence.trace.common import _fmt, _mode
from ddpadvisor.evidence.trace.context import Context


class AccumulationReader(Context):
    """Accumulation, loss scaling and zero_grad between micro-batches."""

    def accumulation(self) -> None:
        steps = [r for r in self.r0.steps.values() if r.get("loss")]
        if not steps:
            return
        micro = []
        for r in steps:
            digests = r.get("dig") or []
            distinct = len({json.dumps(d) for d in digests}) if digests else len(r["loss"])
            micro.append(max(1, min(distinct, len(r["loss"]))))
        body = micro[1:-1] if len(micro) > 4 else micro
        accum = int(_mode(body))
        self.accum = accum
        self.add(
            "grad_accum_steps",
            accum,
            detail=f"{accum} micro-batch(es) with a backward per optimizer step",
        )
        if accum == 1:
            synced = [sum(1 for s in r.get("syn") or [] if s) for r in steps]
            if synced and any(r.get("syn") for r in steps):
                mean = sum(synced) / len(synced)
                detail = None
                if mean >= 1.5:
                    detail = (
                        f"{mean:.2g} gradient-synchronising backward passes per optimizer step on "
                        "a single micro-batch: auxiliary backwards go through the DDP model"
                    )
                self.add("synced_backwards_per_optimizer_step", mean, detail=detail)
                self.add("extra_backward_through_ddp", mean >= 1.5, detail=detail)
        else:
            self._extra_synced_backwards(steps, micro)
            windows = [r for r in steps if len(r["loss"]) >= 2]
            zeroed = [r["s"] for r in windows if r.get("zb")]
            if windows:
                share = len(zeroed) / len(windows)
                self.add(
                    "zero_grad_every_micro_step",
                    share >= 0.5,
                    where=f"rank {self.r0.rank} step {zeroed[0]}" if zeroed else None,
                    detail=(
                        f"gradients were zeroed between micro-batches in {len(zeroed)} of "
                        f"{len(windows)} accumulation windows: only the last micro-batch counts"
                    )
                    if zeroed
                    else None,
                )
        factors = [f for r in steps for f in r.get("fac") or [] if isinstance(f, (int, float))]
        tensor_div = any(any(r.get("tdiv") or []) for r in steps)
        factor = _mode([round(f, 9) for f in factors]) if factors else None
        if accum >= 2 and (factor is not None or tensor_div):
            divided = tensor_div or (factor is not None and factor < 0.999)
            if divided:
                how = (
                    f"by {_fmt(1 / factor)}"
                    if factor is not None and not tensor_div
                    else "by a token/sample count"
                )
                detail = f"the loss is divided {how} before backward"
                if factor is not None and not tensor_div and abs(1 / factor - accum) > 1e-6:
                    # e.g. the HF Trainer's num_items_in_batch: the tokens of the window
                    detail += f" (not the {accum} accumulation steps: a token or sample count)"
            else:
                detail = (
                    f"loss not divided by accumulation steps: grad norm scales with accumulation "
                    f"(the backward'd loss carries factor {_fmt(factor)}, so {accum} micro-batches "
                    f"add up to {accum}× the mean gradient)"
                )
            self.add("loss_divided_by_accum", divided, detail=detail)
            self.add("grad_norm_scales_with_accum", not divided, detail=None if divided else detail)
        if factor is not None and self.world > 1:
            # x world size, and with accumulation / k on top (a framework that divides by the
            # accumulation steps, Lightning's automatic optimization): factor * k = world size
            times = factor > 1 and abs(factor - self.world) < 1e-6
            divided_too = accum >= 2 and factor < 0.999 and abs(factor * accum - self.world) < 1e-6
            scaled = times or divided_too
            detail = None
            if times:
                detail = f"the loss is multiplied by {_fmt(factor)} (= world size) before backward"
            elif divided_too:
                detail = (
                    f"the loss reaches backward with factor {_fmt(factor)} = world size / "
                    f"{accum} accumulation steps: multiplied by the world size, then divided"
                )
            # the loss summed terms below the factor (``fterms``): a term multiplied inside
            # (its weight times the world size) is unseen, so no factor found says nothing
            terms = {n for r in steps for n in r.get("fterms") or []}
            if scaled or not terms - {1}:
                self.add("loss_multiplied_by_world_size", scaled, detail=detail)
            if not tensor_div:
                # / world size (and / k with accumulation) on top of DDP's own average; a
                # division by a token or sample tensor leaves the count unknown here
                total = factor * max(accum, 1) * self.world
                by_world = factor < 0.999 and abs(total - 1) < 1e-6
                # a division inside one of several terms is unseen too, and (a + b) / 2
                # averages two terms as much as it divides by W = 2
                if by_world and self.world not in terms:
                    per = f" / {accum} accumulation steps" if accum >= 2 else ""
                    detail = (
                        f"the loss reaches backward with factor {_fmt(factor)} = 1 / world size"
                        f"{per}: divided by the world size, and DDP averages again"
                    )
                    self.add("loss_divided_by_world_size", True, detail=detail)
                elif (
                    not by_world
                    and not terms - {1}
                    and (scaled or any(abs(factor * k - 1) < 1e-6 for k in {1, max(accum, 1)}))
                ):
                    # a factor every step of which is accounted for; any other constant (a
                    # count, a temperature squared over the world size) leaves it open
                    self.add("loss_divided_by_world_size", False)

    def _extra_synced_backwards(self, steps: list[dict[str, object]], micro: list[int]) -> None:
        """With accumulation: auxiliary backward passes that synchronised. A window with more
        backward passes than micro-batches runs a second backward on some micro-batch (an
        auxiliary loss); it needs one synchronising backward when it skips the sync on some
        (no_sync), one per micro-batch when it never does. More in most such windows is an
        auxiliary backward through the DDP model outside no_sync. Several syncs in a window
        of one backward per micro-batch (a no_sync period out of step with the optimizer's)
        reduce the gradients more often, not twice."""
        counted = extra = 0
        excess = []
        for r, k in zip(steps, micro):
            syn = r.get("syn")
            if not isinstance(syn, list) or not syn:
                continue
            synced = sum(1 for x in syn if x)
            needed = 1 if any(x is False for x in syn) else k
            counted += 1
            if len(syn) > k and synced > needed:
                extra += 1
                excess.append(synced / needed)
        if counted < 3:
            return
        if extra / counted >= 0.5:
            mean = sum(excess) / len(excess)
            detail = (
                f"{extra} of {counted} accumulation windows ran more gradient-synchronising "
                f"backward passes than the window needs ({_fmt(mean)}x): an auxiliary backward "
                "goes through the DDP model outside no_sync"
            )
            self.add("extra_backward_through_ddp", True, detail=detail)
        elif extra == 0:
            self.add("extra_backward_through_ddp", False)

"""A DeepSpeed engine as the job ran it: precision and loss scaling, ZeRO, how the loop drives
the engine's accumulation, weights loaded into the engine's module after it was built.

The agent writes one ``ds`` record per engine (hooks/deepspeed.py) and, in each step record,
the engine's calls during that optimizer step (``ds``: ``steps`` engine.step calls, ``bwd``
engine.backward calls, ``bnd`` the boundary flag the engine reported at each backward).
DeepSpeed counts its micro-steps in ``engine.step()`` (``micro_steps += 1`` there) and reaches
its accumulation boundary every ``gradient_accumulation_steps`` calls of it, so a loop must call
``engine.backward`` and ``engine.step`` once per micro-batch (or own the boundary through
``set_gradient_accumulation_boundary``, as accelerate does)
(https://github.com/deepspeedai/DeepSpeed/blob/master/deepspeed/runtime/engine.py, and the
training loop of https://www.deepspeed.ai/getting-started/).
"""

from __future__ import annotations

import statistics

from ddpadvisor.evidence.trace.common import _fmt, _ranks_text
from ddpadvisor.evidence.trace.context import Context


class DeepSpeedReader(Context):
    """A DeepSpeed engine as the job ran it (nothing is added for a job without one)."""

    def deepspeed_engine(self) -> None:
        ds = self.deepspeed
        if ds is None:
            ends = [t.first("end") for t in self.ranks]
            if (
                self.r0.steps
                and ends
                and all(e is not None and e.get("dsmod") is False for e in ends)
            ):
                self.add(
                    "uses_deepspeed",
                    False,
                    detail="no rank imported DeepSpeed, so no DeepSpeed engine ran",
                )
            return
        self.add(
            "uses_deepspeed", True, detail=f"a DeepSpeed engine (ZeRO stage {ds.get('stage') or 0})"
        )
        stage = int(ds.get("stage") or 0)
        if stage >= 1:
            self.add(
                "uses_fsdp_or_zero",
                True,
                detail=f"DeepSpeed ZeRO stage {stage}: optimizer state"
                + (", gradients" if stage >= 2 else "")
                + (" and parameters" if stage >= 3 else "")
                + " partitioned across ranks",
            )
        if self.common_steps:
            if ds.get("fp16"):
                how = "dynamic" if ds.get("dynamic") else "static"
                self.add(
                    "precision",
                    "fp16_amp",
                    detail=f"DeepSpeed fp16: float16 module weights, float32 master weights in "
                    f"the optimizer, a {how} loss scale",
                )
                self.add("uses_grad_scaler", True, detail=f"DeepSpeed's {how} loss scaler")
            elif ds.get("bf16"):
                self.add(
                    "precision",
                    "bf16_amp",
                    detail="DeepSpeed bf16: bfloat16 module weights, float32 master weights",
                )
            elif "float32" in (ds.get("dtypes") or ["float32"]):
                self.add("precision", "fp32", detail="DeepSpeed engine with float32 weights")
        self._engine_calls(ds, stage)
        self._loaded_after_engine(stage)

    def _engine_calls(self, ds: dict[str, object], stage: int) -> None:
        """``engine.backward`` calls per optimizer step over the engine's
        gradient_accumulation_steps: 1 when the loop calls ``engine.step()`` on every
        micro-batch, or when the caller owns the boundary (accelerate sets it with
        ``set_gradient_accumulation_boundary`` and calls ``engine.step()`` there only)."""
        gas = ds.get("gas")
        if not isinstance(gas, int) or gas < 1:
            return
        ratios = []
        first_odd = None
        for t in self.ranks:
            for s in sorted(t.steps):
                calls = t.steps[s].get("ds")
                if not isinstance(calls, dict) or calls.get("overflow"):
                    continue
                bwd, steps = calls.get("bwd"), calls.get("steps")
                if not isinstance(bwd, int) or bwd < 1:
                    continue
                ratio = bwd / gas
                ratios.append(ratio)
                if ratio >= 1.5 and first_odd is None:
                    first_odd = (t.rank, s, bwd, steps)
        if not ratios:
            return
        value = statistics.median(ratios)
        detail = f"median over {len(ratios)} optimizer steps (gradient_accumulation_steps {gas})"
        where = None
        if value >= 1.5 and first_odd is not None:
            rank, s, bwd, steps = first_odd
            where = f"rank {rank} step {s}"
            detail = (
                f"{bwd} engine.backward calls and {steps} engine.step calls made optimizer step "
                f"{s}, where the config's gradient_accumulation_steps is {gas}: the loop's "
                f"window stretches the engine's to {_fmt(value)} times the micro-batches the "
                "config says, "
                + (
                    f"and under ZeRO-{stage} the step uses only the last of them (each "
                    "boundary backward replaces the gradient partition the one before stored)"
                    if stage in (1, 2)
                    else "all summed, each divided by gradient_accumulation_steps only"
                )
            )
        self.add("ds_backwards_per_accumulation_window", value, where=where, detail=detail)

    def _loaded_after_engine(self, stage: int) -> None:
        """Weights loaded into the engine's module after the engine was built. Under ZeRO
        stage 1 and 2 the optimizer steps its own float32 copy of each rank's partition and
        writes it back over the module's weights, so a load_state_dict into the module after
        deepspeed.initialize is undone at the first optimizer step."""
        loads = {
            t.rank: [
                r.get("s")
                for r in t.kind("load")
                if r.get("kind") == "model" and r.get("after_wrap") and r.get("wrapped")
            ]
            for t in self.ranks
        }
        if not self.common_steps:
            return
        loaders = sorted(r for r, v in loads.items() if v)
        if not loaders:
            self.add("ds_weights_loaded_after_init", False)
            return
        if stage not in (1, 2):
            return  # stage 0 steps the module's own weights; stage 3: not measured here
        step = next(s for r in loaders for s in loads[r])
        self.add(
            "ds_weights_loaded_after_init",
            True,
            where=f"rank {loaders[0]} step {step}",
            detail=f"{_ranks_text(loaders)} called load_state_dict on the engine's module after "
            f"deepspeed.initialize (before optimizer step {int(step or 0) + 1}); ZeRO stage "
            f"{stage} steps its own float32 partitions and copies them back over the module",
        )

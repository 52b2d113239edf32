"""The LR scheduler against the optimizer steps."""

from __future__ import annotations

import itertools

from ddpadvisor.evidence.trace.common import _covers, _fmt
from ddpadvisor.evidence.trace.context import Context
from ddpadvisor.evidence.trace.frameworks import scheduler_driver

# Schedulers whose rate rises again by design.
CYCLIC_SCHEDULERS = {"CyclicLR", "CosineAnnealingWarmRestarts", "OneCycleLR"}
# schedulers that cut the rate when a monitored value stops improving, not on a plan
LOSS_DRIVEN_SCHEDULERS = {"ReduceLROnPlateau"}
# a schedule done decaying holds its final rate (at most this share of its peak) for at least
# this share of the run's optimizer steps: its plan was far shorter than the run. Healthy step
# decays take their last cut at 60-90 % of training (ResNet's 30/60/80 of 90 epochs), cosine
# and linear decays at the end, so the final rate holds for 40 % of a run at most.
HELD_BELOW_PEAK = 0.5
HELD_SHARE_OF_RUN = 0.6


class ScheduleReader(Context):
    """The LR scheduler against the optimizer steps."""

    def scheduler(self) -> None:
        self._warmup_from_lr()
        self._lr_schedule_overran()
        self._schedule_fraction()
        t = self.r0
        # a scheduler of another optimizer than the counted one is stepped against that one's
        # steps, which the trace does not count (the agent counts only the counted one's)
        if not any(r.get("primary", True) for r in t.kind("sched")) or not t.steps:
            return
        end = t.first("end")
        total = int(
            (end or {}).get("sched") or sum(int(r.get("sch") or 0) for r in t.steps.values())
        )
        steps = max(t.steps)
        # --max-steps ends the job right after the last optimizer step, before the scheduler
        # step that follows it: that step has had no chance to advance the schedule
        stepped = steps - 1 if (end or {}).get("why") == "max_steps" and steps > 1 else steps
        ratio = total / stepped if stepped else 0.0
        train = self._train_sampler(t)
        epochs = len([e for e in t.epochs if e.get("sampler") == train and _covers(e)])
        if ratio < 0.9 and epochs and abs(total - epochs) <= 1 and steps / max(epochs, 1) > 1.5:
            return  # a per-epoch schedule: stepping once per epoch is how it is meant to run
        detail = f"{total} scheduler steps for {stepped} optimizer steps" + (
            " (the last step, cut off by --max-steps, not counted)" if stepped < steps else ""
        )
        driver = scheduler_driver((t.first("sched") or {}).get("by"))
        split = any(e.get("split_batches") for e in t.epochs if e.get("shard"))
        # a framework that never connected the ranks (accelerate settling on a single
        # process) steps its schedule once per optimizer step, not once per process
        if (
            driver is not None
            and driver.steps_per_process
            and not split
            and self.world > 1
            and not self.nothing_syncs
        ):
            # the framework advances a schedule planned in single-process batches W times
            ratio /= self.world
            detail += f" ({driver.why}): {ratio:.2g} per optimizer step per process"
        if ratio >= 1.1 and self.accum >= 2 and abs(ratio - self.accum) < 0.5:
            detail += (
                f": the scheduler steps on every micro-batch ({self.accum} per optimizer step)"
            )
        self.add("scheduler_steps_per_optimizer_step", ratio, detail=detail)

    def _lr_schedule_overran(self) -> None:
        """lr_schedule_overran (and lr_follows_intended_schedule false): under a scheduler that
        decays once (not a cyclic one), the rate the optimizer used rose again by more than
        10 % after it had decayed, sat at zero for the last fifth of the run or more, or held
        a final rate at most half its peak for the last 60 % of the run or more; false once a
        decay was seen and none of these happened.
        CosineAnnealingLR, stepped past T_max, climbs back to its peak; a schedule whose
        length was counted in epochs or per process and is stepped per iteration restarts
        the same way."""
        # one scheduler class (its first step may come from its constructor, before any
        # optimizer stepped, and be recorded as not the counted optimizer's)
        classes = {str(r.get("cls")) for r in self.r0.kind("sched")}
        if len(classes) != 1 or classes & CYCLIC_SCHEDULERS:
            return
        lrs = self._first_group_lrs()
        if lrs is None:
            return

        def overran(at: int, detail: str) -> None:
            self.add("lr_schedule_overran", True, where=f"step {at}", detail=detail)
            self.add("lr_follows_intended_schedule", False, where=f"step {at}", detail=detail)

        peak = 0.0
        low: float | None = None  # the lowest rate since the decay began
        for s, lr in lrs:
            if low is None:
                if lr < peak * 0.99:
                    low = lr
                peak = max(peak, lr)
                continue
            if lr > low * 1.1 and lr - low > 0.05 * peak:
                overran(
                    s,
                    f"the learning rate ({next(iter(classes))}) decayed from {_fmt(peak)} to "
                    f"{_fmt(low)}, then rose again to {_fmt(lr)} at step {s}: the schedule ran "
                    "past its length (its total counted in epochs, or per process, and stepped "
                    "per optimizer step)",
                )
                return
            low = min(low, lr)
        if low is None or peak <= 0:
            return
        # a rate at zero (under 1 % of its peak) from some step to the end, for at least a
        # fifth of the run and two steps: the schedule's total was shorter than the run
        tail = 0
        for _, lr in reversed(lrs):
            if lr > 0.01 * peak:
                break
            tail += 1
        if tail >= 2 and tail >= 0.2 * len(lrs):
            at = lrs[-tail][0]
            overran(
                at,
                f"the learning rate ({next(iter(classes))}) reached {_fmt(lrs[-tail][1])} at "
                f"step {at} and stayed there for the last {tail} of {len(lrs)} optimizer "
                "steps: the schedule's total was shorter than the run (counted per process, "
                "or in epochs, against the steps the optimizer took)",
            )
            return
        # a step decay whose milestones (or step size) were counted in epochs and which is
        # stepped per iteration takes every decay in the first few steps, then holds its
        # final rate: held for most of the run, well below the peak. A rate cut by the loss
        # itself (ReduceLROnPlateau) may settle early in a healthy run and says nothing.
        held = 0
        final = lrs[-1][1]
        for _, lr in reversed(lrs):
            if abs(lr - final) > 0.01 * max(final, 1e-12):
                break
            held += 1
        if (
            classes.isdisjoint(LOSS_DRIVEN_SCHEDULERS)
            and final <= HELD_BELOW_PEAK * peak
            and held >= 2
            and held >= HELD_SHARE_OF_RUN * len(lrs)
        ):
            at = lrs[-held][0]
            overran(
                at,
                f"the learning rate ({next(iter(classes))}) fell from {_fmt(peak)} to its final "
                f"{_fmt(final)} by step {at} and held it for the last {held} of {len(lrs)} "
                "optimizer steps: the schedule's decays were planned for a shorter run "
                "(milestones or a step size counted in epochs, stepped per optimizer step)",
            )
            return
        self.add("lr_schedule_overran", False)

    def _schedule_fraction(self) -> None:
        """lr_schedule_fraction_run: the steps a scheduler with a planned end took over that
        plan (``plans`` of rank 0's end record: OneCycleLR's total_steps, CosineAnnealingLR's
        T_max, a transformers schedule's num_training_steps, ...), said only of a job that
        ended by itself: no --max-steps, no crash, no timeout. Where several had a plan, the
        latest one (a later phase's) is the training's."""
        end = self.r0.first("end")
        if end is None or end.get("why") != "exit":
            return
        if any(t.first("exception") is not None for t in self.ranks):
            return
        plans = [
            p
            for p in end.get("plans") or []
            if isinstance(p, list)
            and len(p) >= 3
            and isinstance(p[1], int)
            and isinstance(p[2], int)
            and p[1] > 0
            and (len(p) < 5 or p[4] is not False)  # another optimizer's schedule
        ]
        if not plans:
            return
        cls, planned, taken = str(plans[-1][0]), plans[-1][1], plans[-1][2]
        fraction = taken / planned
        detail = f"{cls} was built for {planned} steps and took {taken} before the job ended"
        multiple = None
        if fraction < 0.75:
            detail += f": {1 - fraction:.0%} of the schedule never ran"
            multiple = _parallel_multiple(fraction, self.world, max(1, self.accum))
            if multiple is not None:
                detail += f" ({multiple}: its length looks counted {_COUNTED[multiple]})"
        self.add("lr_schedule_fraction_run", fraction, detail=detail)
        if fraction < 0.75:
            self.add(
                "lr_schedule_plan_counts_parallelism",
                multiple is not None,
                detail=f"the plan is {planned / max(taken, 1):.3g} times the steps taken"
                + (f", {multiple}" if multiple is not None else ""),
            )

    def _first_group_lrs(self) -> list[tuple[int, float]] | None:
        """(step, learning rate of the first param group) at each of rank 0's optimizer steps;
        None when a step recorded no usable rate."""
        lrs: list[tuple[int, float]] = []
        for s in sorted(self.r0.steps):
            values = self.r0.steps[s].get("lr")
            lr = values[0] if isinstance(values, list) and values else None
            if not isinstance(lr, (int, float)) or isinstance(lr, bool) or lr != lr:
                return None
            lrs.append((s, float(lr)))
        return lrs

    def _warmup_from_lr(self) -> None:
        """warmup_steps as the run used the learning rate (the first param group's, recorded
        at each optimizer step): 0 when the first step already ran at the highest rate seen;
        otherwise the steps it took to rise to its peak, when the rate then held or fell for
        at least as long again. A rate still rising when the trace ends says nothing."""
        steps = self._first_group_lrs()
        if steps is None:
            return
        lrs = [lr for _, lr in steps]
        if len(lrs) < 4:
            return
        peak = max(lrs)
        if peak <= 0:
            return
        top = next(i for i, v in enumerate(lrs) if v >= peak * (1 - 1e-6))
        if top == 0:
            self.add(
                "warmup_steps",
                0,
                detail=f"the first optimizer step already ran at the highest learning rate of "
                f"the {len(lrs)} traced ({_fmt(lrs[0])})",
            )
            return
        rising = all(b >= a * (1 - 1e-9) for a, b in itertools.pairwise(lrs[: top + 1]))
        if not rising or len(lrs) - 1 - top < top:
            return  # not a ramp, or the trace ends before the peak is clearly past
        warmup = top if lrs[0] == 0 else top + 1
        self.add(
            "warmup_steps",
            warmup,
            where=f"step {top + 1}",
            detail=f"the learning rate rose from {_fmt(lrs[0])} to {_fmt(peak)} over the first "
            f"{warmup} optimizer steps",
        )


_COUNTED = {
    "the world size times the run": "over the whole dataset, while each rank reads its own shard",
    "the accumulation steps times the run": "in micro-batches, while the optimizer steps once "
    "per accumulation window",
    "the world size times the accumulation steps times the run": "in micro-batches over the "
    "whole dataset, while each rank reads its own shard and steps once per window",
}


def _parallel_multiple(fraction: float, world: int, accum: int) -> str | None:
    """Which count of parallel work the plan's length over the run's equals, within 5 %:
    W (counted over the whole dataset), k (counted in micro-batches) or W x k; None when it
    is none of them. A plan counted that way is exactly that multiple of the run; a healthy
    run stopped early lands on one of them only by chance."""
    options = {
        "the world size times the run": world,
        "the accumulation steps times the run": accum,
        "the world size times the accumulation steps times the run": world * accum,
    }
    for name, k in options.items():
        if k > 1 and abs(fraction * k - 1) < 0.05:
            return name
    return None

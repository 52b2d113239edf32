"""The LR scheduler against the optimizer steps."""

from __future__ import annotations

from ddpadvisor.evidence.trace.common import _covers
from ddpadvisor.evidence.trace.context import Context
from ddpadvisor.evidence.trace.frameworks import scheduler_driver


class ScheduleReader(Context):
    """The LR scheduler against the optimizer steps."""

    def scheduler(self) -> None:
        t = self.r0
        if not t.kind("sched") or not t.steps:
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

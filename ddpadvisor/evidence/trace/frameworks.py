"""What training frameworks do by design, as the trace reader needs to know it.

A trace records what torch saw. Some framework wrappers do on purpose what a hand-written loop
would do by mistake; the reader consults this table before it calls a measurement a fault.
Each entry names the framework code and where its behaviour is documented or implemented.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SchedulerDriver:
    """A wrapper that calls the user's LR scheduler's ``step`` for them."""

    framework: str
    steps_per_process: bool  # it steps the scheduler once per process per optimizer step
    why: str
    source: str


# ``by`` of a trace's ``sched`` record (module.Qualified.name of the caller of step()).
SCHEDULER_DRIVERS: dict[str, SchedulerDriver] = {
    "accelerate.scheduler.AcceleratedScheduler.step": SchedulerDriver(
        framework="accelerate",
        steps_per_process=True,
        why="accelerate's AcceleratedScheduler steps the scheduler num_processes times per "
        "optimizer step (each process reads 1/num_processes of the batches), unless "
        "split_batches; only when the optimizer really stepped",
        source="https://github.com/huggingface/accelerate/blob/main/src/accelerate/scheduler.py",
    ),
}


def scheduler_driver(by: object) -> SchedulerDriver | None:
    return SCHEDULER_DRIVERS.get(by) if isinstance(by, str) else None

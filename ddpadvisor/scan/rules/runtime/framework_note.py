from __future__ import annotations

from ddpadvisor.scan.rules.base import RuleContext
from ddpadvisor.scan.rules.registry import rule


@rule(
    "Notes which framework (HF Trainer, accelerate, Lightning) drives the step; sets no fact.",
)
def framework_note(rc: RuleContext) -> None:
    note = rc.framework.note() if rc.framework is not None else None
    if note is not None:
        rc.warn(note)

from __future__ import annotations

from ddpadvisor.scan import values as V
from ddpadvisor.scan.rules.base import RuleContext
from ddpadvisor.scan.rules.registry import rule


@rule(
    "Notes which framework (HF Trainer, accelerate, Lightning) drives the step; sets no fact.",
)
def framework_note(rc: RuleContext) -> None:
    if rc.hf:
        tr = rc.trainer()
        rc.warn(
            f"{tr.where if tr else rc.label}: HF Trainer script: data sharding, set_epoch, "
            "accumulation and gradient sync are handled by the framework"
        )
    elif rc.acc:
        acc = rc.a.objs(V.ACCELERATOR)[0]
        rc.warn(
            f"{acc.where}: accelerate script: accelerator.prepare() shards the data and "
            "accelerator.accumulate() handles gradient sync"
        )

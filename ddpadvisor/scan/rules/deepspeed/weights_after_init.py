from __future__ import annotations

from ddpadvisor.scan import apis
from ddpadvisor.scan import values as V
from ddpadvisor.scan.rules.base import RuleContext, may_not_run
from ddpadvisor.scan.rules.registry import not_in_excerpt, rule

# The engine's own loader restores weights into every rank's partitions; a module's
# load_state_dict after deepspeed.initialize writes around them (the optimizer's fp32 master
# copy and, at ZeRO-3, the partitioned parameters keep what they held).
_ENGINE_LOADERS = {"load_checkpoint", "load_state"}


@rule(
    "Whether weights are loaded into the model after deepspeed.initialize built the engine.",
    facts={"ds_weights_loaded_after_init": not_in_excerpt(False)},
)
def weights_after_init(rc: RuleContext) -> None:
    engine = rc.ds
    if engine is None:
        return
    a = rc.a
    fact = "ds_weights_loaded_after_init"
    models = {r for r in (engine.ref, engine.wraps) if r is not None}
    late = []
    for e in a.events:
        if e.kind != "call" or e.seq <= engine.seq or e.recv is None:
            continue
        name = e.method or apis.last(e.name)
        if name not in apis.STATE_LOADERS or name in _ENGINE_LOADERS:
            continue
        if e.recv.kind in (V.MODEL, V.DDP, V.DDP_MODULE) and e.recv.ref in models:
            late.append(e)
    sure = [e for e in late if not may_not_run(rc, e)]
    if sure:
        e = sure[0]
        rc.emit(
            fact,
            True,
            e.where,
            f"weights loaded into the model after deepspeed.initialize ({e.where}): the engine's "
            "optimizer keeps the copy it took at initialize (load before, or engine.load_checkpoint)",
        )
    elif late:
        rc.warn(
            f"{late[0].where}: weights are loaded into the model after deepspeed.initialize "
            "under an option the run decides; ds_weights_loaded_after_init left open"
        )
    elif a.main_backward is not None:
        rc.emit(
            fact,
            False,
            engine.where,
            "no weights loaded into the model after deepspeed.initialize",
        )

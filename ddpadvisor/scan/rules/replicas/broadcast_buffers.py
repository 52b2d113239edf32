from __future__ import annotations

from ddpadvisor.scan import apis
from ddpadvisor.scan.library.views import SCRIPT
from ddpadvisor.scan.rules.base import RuleContext
from ddpadvisor.scan.rules.registry import ANY_EXCERPT, rule


@rule(
    "Whether the DDP wrap turns broadcast_buffers off.",
    facts={
        "broadcast_buffers_disabled": ANY_EXCERPT,  # off the DDP constructor's keywords
    },
)
def broadcast_buffers(rc: RuleContext) -> None:
    fact = "broadcast_buffers_disabled"
    fw = rc.framework
    said = fw.broadcast_buffers_disabled() if fw is not None else SCRIPT
    if said is not SCRIPT:
        rc.say(fact, said)
        return
    for e in rc.a.calls():
        if apis.last(e.name) == "DistributedDataParallelKwargs":
            bb = e.kwargs.get("broadcast_buffers")
            if bb is not None and bb.known:
                rc.emit(
                    fact,
                    bb.const is False,
                    e.where,
                    f"DistributedDataParallelKwargs(broadcast_buffers={bb.const})",
                )
                return
    for o in rc.a.ddps:
        if o.extra.get("accelerate") or o.extra.get("deepspeed"):
            continue
        bb = o.kwargs.get("broadcast_buffers")
        if bb is None:
            rc.emit(fact, False, o.where, "DDP keeps the default broadcast_buffers=True")
        elif bb.known:
            if bb.const is False:
                rc.emit(
                    fact,
                    True,
                    o.where,
                    f"DDP(broadcast_buffers=False) at {o.where}: buffers drift per rank",
                )
            else:
                rc.emit(fact, False, o.where, "DDP(broadcast_buffers=True)")
        return

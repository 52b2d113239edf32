from __future__ import annotations

from ddpadvisor.scan import values as V
from ddpadvisor.scan.library.views import SCRIPT
from ddpadvisor.scan.rules.accumulation._shared import _trained_loss
from ddpadvisor.scan.rules.base import RuleContext, lines_at
from ddpadvisor.scan.rules.registry import not_in_excerpt, rule


@rule(
    "Whether the trained loss is multiplied by the world size.",
    facts={
        "loss_multiplied_by_world_size": not_in_excerpt(False),
    },
)
def loss_scaling(rc: RuleContext) -> None:
    fw = rc.framework
    said = fw.loss_world_factor("mul") if fw is not None else SCRIPT
    if said is not SCRIPT:
        rc.say("loss_multiplied_by_world_size", said)
        return
    trained = _trained_loss(rc)
    if trained is None:
        return
    loss, where = trained
    if V.MUL_WORLD in loss.taint and V.NORM_GLOBAL not in loss.taint:
        where = (lines_at(loss.taint, "mulworld") or [where])[-1]
        rc.emit(
            "loss_multiplied_by_world_size",
            True,
            where,
            f"loss multiplied by the world size before backward ({where}); DDP already averages",
        )
        return
    rc.emit("loss_multiplied_by_world_size", False, where, "loss not rescaled by the world size")

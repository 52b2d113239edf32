from __future__ import annotations

from ddpadvisor.scan import values as V
from ddpadvisor.scan.library.views import SCRIPT
from ddpadvisor.scan.rules.accumulation._shared import _trained_loss
from ddpadvisor.scan.rules.base import RuleContext, lines_at
from ddpadvisor.scan.rules.registry import not_in_excerpt, rule


@rule(
    "Whether the trained loss is divided by the world size while DDP averages too.",
    facts={
        "loss_divided_by_world_size": not_in_excerpt(False),
    },
)
def loss_division(rc: RuleContext) -> None:
    """A loss divided by the world size (or normalised by a count summed over all ranks and not
    multiplied back) while DDP or FSDP averages the gradients as well: divided twice."""
    fact = "loss_divided_by_world_size"
    fw = rc.framework
    said = fw.loss_world_factor("div") if fw is not None else SCRIPT
    if said is not SCRIPT:
        rc.say(fact, said)
        return
    averaged = rc.a.ddps or rc.a.fsdps or (fw is not None and fw.averages_gradients())
    trained = _trained_loss(rc)
    if trained is None or not averaged:
        return  # without DDP's average, a hand-written SUM of gradients wants the division
    loss, where = trained
    if V.MUL_WORLD in loss.taint:
        rc.emit(fact, False, where, "the loss carries the world size as a factor, not a divisor")
        return
    divided_at = lines_at(loss.taint, "divworld")  # the loss divided, not its divisor's history
    if divided_at:
        where = divided_at[-1]
        rc.emit(
            fact,
            True,
            where,
            f"loss divided by the world size before backward ({where}); DDP divides again",
        )
        return
    if V.NORM_GLOBAL in loss.taint:
        where = (lines_at(loss.taint, "normglobal") or [where])[-1]
        rc.emit(
            fact,
            True,
            where,
            f"loss normalised by a count summed over all ranks and not multiplied back by the "
            f"world size ({where}); DDP's average divides it by the world size again",
        )
        return
    rc.emit(fact, False, where, "loss not divided by the world size")

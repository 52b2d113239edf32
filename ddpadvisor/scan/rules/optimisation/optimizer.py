from __future__ import annotations

from ddpadvisor.scan import apis
from ddpadvisor.scan import values as V
from ddpadvisor.scan.library.views import SCRIPT, Optimizer
from ddpadvisor.scan.rules.base import RuleContext, num
from ddpadvisor.scan.rules.registry import ANY_EXCERPT, rule


@rule(
    "The optimizer family and Adam's beta2.",
    facts={
        "optimizer_family": ANY_EXCERPT,
        "adam_beta2": ANY_EXCERPT,
    },
)
def optimizer(rc: RuleContext) -> None:
    fw = rc.framework
    said = fw.optimizer() if fw is not None else SCRIPT
    if isinstance(said, Optimizer):
        rc.say("optimizer_family", said.family)
        rc.say("adam_beta2", said.beta2)
        return
    opt = rc._main_optimizer()
    if opt is None:
        fams = {o.extra.get("family") for o in rc.a.objs(V.OPTIMIZER)} - {None}
        if len(fams) > 1:
            rc.warn(f"{rc.label}: several optimizer families; which one trains is not decided")
        return
    fam = opt.extra.get("family")
    if fam is None:
        return
    rc.emit("optimizer_family", fam, opt.where, f"{apis.last(opt.canon)} optimizer")
    if fam != "adam":
        return
    betas = opt.kwargs.get("betas")
    if betas is None:
        if apis.last(opt.canon) in ("Adam", "AdamW", "NAdam", "RAdam", "Adamax"):
            rc.emit("adam_beta2", apis.ADAM_DEFAULT_BETA2, opt.where, "default betas (beta2=0.999)")
        return
    if betas.items is not None and len(betas.items) == 2:
        b2 = num(betas.items[1])
        if b2 is not None and V.ARGDEFAULT in betas.items[1].taint:
            rc.cli_default("adam_beta2", b2, opt.where)
            return
        if b2 is not None:
            rc.emit("adam_beta2", b2, opt.where, f"beta2={b2}")
            return
    if betas.known and isinstance(betas.const, tuple) and len(betas.const) == 2:
        rc.emit("adam_beta2", float(betas.const[1]), opt.where, f"beta2={betas.const[1]}")

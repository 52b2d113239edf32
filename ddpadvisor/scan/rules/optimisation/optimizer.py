from __future__ import annotations

from ddpadvisor.scan import apis
from ddpadvisor.scan import values as V
from ddpadvisor.scan.library.views import SCRIPT, Optimizer
from ddpadvisor.scan.rules.base import RuleContext, may_not_run, num
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
    made = rc.a.by_seq.get(opt.seq)
    if made is not None and may_not_run(rc, made):
        # ``if name == "Adam": ... elif name == "SGD": ...`` over a command-line choice:
        # the optimizer the run builds is the one its option picks, not the first branch
        others = [
            o
            for o in rc.a.objs(V.OPTIMIZER)
            if o is not opt and o.extra.get("family") not in (None, fam)
        ]
        if others:
            rc.warn(
                f"{opt.where}: the optimizer is chosen by an option ({apis.last(opt.canon)} here, "
                f"{apis.last(others[0].canon)} at {others[0].where}); not decided"
            )
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

from __future__ import annotations

import ast

from ddpadvisor.scan import apis
from ddpadvisor.scan import values as V
from ddpadvisor.scan.context import Event
from ddpadvisor.scan.library.views import SCRIPT, Optimizer
from ddpadvisor.scan.rules.base import KNOWN_HEADS, RuleContext, may_not_run, num
from ddpadvisor.scan.rules.registry import ANY_EXCERPT, rule
from ddpadvisor.scan.values import Obj


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
    wrapper = _wrapped_by_unread_class(rc, opt)
    if wrapper is not None:
        rc.warn(
            f"{wrapper.where}: the {apis.last(opt.canon)} optimizer is wrapped by "
            f"{apis.last(wrapper.name)}(), which the scan does not read (LARC, Lookahead, SAM "
            "change the update); optimizer family not decided"
        )
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


def _wrapped_by_unread_class(rc: RuleContext, opt: Obj) -> Event | None:
    """``optimizer = LARC(optimizer=optimizer, ...)``: the optimizer handed to a class the scan
    does not read (not the project's, not a library it models), whose object replaces it."""
    assigned = {
        id(node.value)
        for m in (rc.walk.sources.main, *rc.walk.sources.modules.values())
        for node in ast.walk(m.tree)
        if isinstance(node, ast.Assign)
        and len(node.targets) == 1
        and isinstance(node.targets[0], (ast.Name, ast.Attribute))
    }
    for e in rc.a.calls():
        if e.seq <= opt.seq or id(e.node) not in assigned:
            continue
        if e.name.startswith(("local:", ".")) or e.name.split(".")[0] in KNOWN_HEADS:
            continue
        if not apis.last(e.name)[:1].isupper():
            continue  # a function (``amp.initialize``) hands the optimizer back, not a wrapper
        if any(v.ref == opt.ref for v in [*e.args, *e.kwargs.values()]):
            return e
    return None

from __future__ import annotations

from ddpadvisor.scan import values as V
from ddpadvisor.scan.context import Event
from ddpadvisor.scan.library.views import SCRIPT
from ddpadvisor.scan.rules.base import RuleContext, call_site, exclusive
from ddpadvisor.scan.rules.registry import ANY_EXCERPT, rule
from ddpadvisor.scan.values import Obj


@rule(
    "Whether the training forward goes around the DDP wrapper.",
    facts={
        "forward_bypasses_ddp": ANY_EXCERPT,  # off the forward call shown
    },
)
def forward_route(rc: RuleContext) -> None:
    a = rc.a
    fact = "forward_bypasses_ddp"
    fw = rc.framework
    said = fw.forward_through_wrapper() if fw is not None else SCRIPT
    if said is not SCRIPT:
        rc.say(fact, said)
        return
    if not a.ddps or a.main_backward is None:
        return
    wrapped = {o.wraps: o for o in a.ddps if o.wraps is not None}
    decided = False
    undecided: list[tuple[Event, Event]] = []
    for b in a.backwards:
        loss = a.loss_of(b)
        if V.FWD not in loss.taint:
            continue
        # Each forward whose output reaches this backward with gradients: through the
        # wrapper, or around it (``model.module(x)``, the inner model after the wrap).
        through: list[Event] = []
        around: list[Event] = []
        for t in loss.taint:
            if not t.startswith("fwdseq:"):
                continue
            f = a.by_seq.get(int(t.split(":", 1)[1]))
            if f is None or f.result is None or a.under_no_grad(f):
                continue
            r = {x.split(":", 1)[1] for x in f.result.taint if x.startswith("route:")}
            ref_txt = {x.split(":", 1)[1] for x in f.result.taint if x.startswith("model:")}
            ref = next((int(x) for x in ref_txt if x.isdigit()), None)
            if r & {V.DDP, V.FSDP}:
                through.append(f)
            elif V.DDP_MODULE in r or (
                V.MODEL in r and ref in wrapped and f.seq > wrapped[ref].seq
            ):
                around.append(f)
        if not through and not around:
            routes = {t.split(":", 1)[1] for t in loss.taint if t.startswith("route:")}
            decided = decided or bool(routes & {V.DDP, V.FSDP})
            continue
        for f in sorted(around, key=lambda e: e.seq):
            # only a forward through this model's own wrapper makes DDP see its gradients
            # (a GAN's generator called around its wrapper, beside the discriminator's
            # forward through the discriminator's wrapper, is still a bypass)
            covering = [g for g in through if _same_model(f, g, wrapped)]
            other = [g for g in covering if exclusive(f, g)]
            if covering and len(other) < len(covering):
                continue  # both reach the same loss: DDP still sees the parameters' gradients
            if other and any(_alternatives(f, g) for g in other):
                undecided.append((f, other[0]))
                continue
            # Around the wrapper on every path the job takes, or on some ranks (``if rank
            # == 0:``, a side the world size or distributed mode selects): a bypass.
            where = call_site(f)
            rc.emit(
                fact,
                True,
                where,
                f"training forward goes around the DDP wrapper ({where}): gradients are never all-reduced",
            )
            return
        decided = decided or bool(through)
    if undecided:
        f, g = undecided[0]
        cond = next(c for c in f.conds() if any(d.node is c.node for d in g.conds()))
        rc.warn(
            f"{cond.file}:{cond.line}: the training forward goes around the DDP wrapper "
            f"({call_site(f)}) on one side of this test and through it on the other; "
            "which one the run takes is not decided"
        )
        return
    if decided:
        rc.emit(
            fact,
            False,
            a.main_backward.where,
            "training forward goes through the DDP-wrapped model",
        )


def _callee(f: Event) -> int | None:
    """The model a forward event called (its own ``fwdof:<ref>:<seq>`` label; the others
    its output carries come from its inputs)."""
    if f.result is None:
        return None
    tail = f":{f.seq}"
    for t in f.result.taint:
        if t.startswith("fwdof:") and t.endswith(tail):
            ref = t[len("fwdof:") : -len(tail)]
            return int(ref) if ref.isdigit() else None
    return None


def _same_model(around: Event, through: Event, wrapped: dict[int, Obj]) -> bool:
    """Whether the forward ``through`` a wrapper calls the wrapper of the model ``around``
    calls around it. Unknown either way: counted as the same (as before)."""
    inner, outer = _callee(around), _callee(through)
    if inner is None or outer is None:
        return True
    wrapper = wrapped.get(inner)
    return outer == inner or (wrapper is not None and outer == wrapper.ref)


def _alternatives(f: Event, g: Event) -> bool:
    """``f`` and ``g`` sit on the two sides of a test the scan cannot decide (not one on the
    rank, the world size or the distributed mode: see interp.branches)."""
    for x in f.conds():
        for y in g.conds():
            if x.node is y.node and x.branch != y.branch and x.job is None:
                return True
    return False

from __future__ import annotations

from ddpadvisor.scan import values as V
from ddpadvisor.scan.analysis import Analysis
from ddpadvisor.scan.context import Event
from ddpadvisor.scan.rules.base import RuleContext, exclusive
from ddpadvisor.scan.rules.registry import not_in_excerpt, rule


def _models_of(a: Analysis, backward: Event) -> set[str]:
    """The models (object refs) whose forward the loss of ``backward`` came from."""
    return {t.split(":", 1)[1] for t in a.loss_of(backward).taint if t.startswith("model:")}


def _ddp_forwards(a: Analysis, backward: Event) -> set[str]:
    """The forward passes of a DDP model (``<ref>:<seq>``) the loss of ``backward`` came from."""
    ddps = {str(d.ref) for d in a.ddps}
    out = set()
    for t in a.loss_of(backward).taint:
        if t.startswith("fwdof:"):
            ref, seq = t[len("fwdof:") :].split(":", 1)
            if ref in ddps:
                out.add(f"{ref}:{seq}")
    return out


@rule(
    "Whether another backward through the DDP model runs in the same step.",
    facts={
        "extra_backward_through_ddp": not_in_excerpt(False),
    },
)
def extra_backward(rc: RuleContext) -> None:
    a = rc.a
    fact = "extra_backward_through_ddp"
    b = a.main_backward
    if rc.hf or b is None or not a.ddps:
        return
    loop = a.step_loop
    if loop is None:
        return
    step = a.main_step
    if step is not None and step.loops() and step.loops()[-1] in b.ctx:
        # one optimizer step's iteration: an auxiliary round in its own loop after the step
        # (a Hessian estimate every k steps) belongs to the same step
        loop = step.loops()[-1]
    same = [
        x
        for x in a.backwards
        if loop in x.ctx
        and V.FWD in a.loss_of(x).taint
        and not any(w.kind == V.CTX_NO_SYNC and w.cond is None for w in x.withs())
    ]
    ddp_routed = [x for x in same if "route:ddp" in a.loss_of(x).taint]
    if not ddp_routed:
        return
    first = b if b in ddp_routed else ddp_routed[0]
    for x in ddp_routed:
        if x is first:
            continue
        if exclusive(first, x):
            continue
        mine, theirs = _models_of(a, first), _models_of(a, x)
        if mine and theirs and not mine & theirs:
            continue  # another DDP model's own backward (a GAN's second net, a reference copy)
        stepped = any(first.seq < s.seq < x.seq for s in a.opt_steps)
        if (
            stepped
            and not _ddp_forwards(a, first) & _ddp_forwards(a, x)
            and set(x.conds()) <= set(first.conds())
            and any(s.seq > x.seq and not exclusive(x, s) for s in a.opt_steps)
        ):
            # A later update's own pass (a GAN's generator loss through the discriminator
            # again, after the discriminator stepped): its own DDP forward, on every step the
            # first runs, the first backward's gradients used up already, and an optimizer
            # step of its own after it. A pass whose gradients feed no step (a Hessian or
            # curvature estimate every k steps) is an auxiliary backward.
            continue
        if a.step_loop is not None and a.step_loop not in x.ctx:
            # A round of its own after the optimizer step (a Hessian estimate every k steps):
            # an auxiliary pass, but the cause turns on whether ranks run it on the same
            # steps, which no fact says yet; stating it alone would blame a symmetric design.
            rc.warn(
                f"{x.where}: another backward round through the DDP model after the optimizer "
                f"step ({first.where} trains); extra backward passes not decided"
            )
            return
        rc.emit(
            fact,
            True,
            x.where,
            f"a second backward through the DDP model in the same step ({x.where}), outside no_sync",
        )
        return
    rc.emit(fact, False, first.where, "one backward through the DDP model per micro-step")

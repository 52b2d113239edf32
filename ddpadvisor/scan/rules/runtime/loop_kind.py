from __future__ import annotations

from ddpadvisor.scan import values as V
from ddpadvisor.scan.analysis import recv_text
from ddpadvisor.scan.library.views import SCRIPT, lightning_trainer
from ddpadvisor.scan.rules.base import RuleContext
from ddpadvisor.scan.rules.registry import ANY_EXCERPT, rule


@rule(
    "Whether the training loop is the script's own rather than a framework's.",
    facts={
        "hand_written_loop": ANY_EXCERPT,
    },
)
def loop_kind(rc: RuleContext) -> None:
    a = rc.a
    fact = "hand_written_loop"
    fw = rc.framework
    said = fw.runs_loop() if fw is not None else SCRIPT
    if said is not SCRIPT:
        rc.say(fact, said)
        return
    if any(o.extra.get("deepspeed") for o in a.ddps):
        ds = next(o for o in a.ddps if o.extra.get("deepspeed"))
        rc.emit(fact, False, ds.where, "the DeepSpeed engine runs backward and step")
        return
    fits = [
        e
        for e in a.calls("fit")
        if "lightning" in e.name.lower()
        or (e.recv is not None and e.recv.kind == V.PL_TRAINER)
        or (e.recv is not None and e.recv.kind is None and "trainer" in recv_text(e).lower())
    ]
    if fits:
        tr = lightning_trainer(a)
        if tr is None or "hooks" not in tr.extra:
            # the LightningModule's class is not in view (an excerpt, a module not read):
            # under manual optimization its training_step would be the user's own loop
            rc.warn(
                f"{fits[0].where}: the LightningModule's code is not read; loop kind not decided"
            )
            return
        if tr.extra.get("manual"):
            # the slips this fact stands for (step, zero_grad, accumulation) are the user's own
            rc.emit(
                fact,
                True,
                fits[0].where,
                "Lightning manual optimization: training_step runs backward, step and "
                "zero_grad itself",
            )
            return
        rc.emit(fact, False, fits[0].where, "a Lightning Trainer runs the loop")
        return
    b = a.main_backward
    if b is not None and (a.ddps or a.fsdps):
        rc.emit(fact, True, b.where, f"hand-written loop: backward() at {b.where}")

from __future__ import annotations

from ddpadvisor.scan import apis
from ddpadvisor.scan import values as V
from ddpadvisor.scan.library.views import SCRIPT, Script
from ddpadvisor.scan.rules.base import (
    RuleContext,
    cli_switched,
    default_runs,
    exclusive,
    may_not_run,
)
from ddpadvisor.scan.rules.registry import not_in_excerpt, rule
from ddpadvisor.scan.values import Obj, Val


@rule(
    "Whether LoRA adapters are added and whether modules are made after the DDP wrap.",
    facts={
        "uses_lora": not_in_excerpt(False),
        "module_created_after_wrap": not_in_excerpt(False),
    },
)
def lora_and_wrap_order(rc: RuleContext) -> None:
    a = rc.a
    lora = rc._lora_evidence()
    models = _trained_models(rc)
    switched = _lora_switched(rc, lora) if lora else None
    if switched == "cli":
        # ``if args.use_lora: model = get_peft_model(...)``: the run's option decides
        rc.cli_default("uses_lora", True, lora[0])
    elif switched == "open":
        rc.warn(f"{lora[0]}: LoRA adapters are added only on one side of an if; not decided")
    elif lora:
        rc.emit("uses_lora", True, lora[0], f"LoRA / PEFT adapters ({lora[0]})")
    elif rc.lora_switched:
        rc.warn(
            f"{rc.lora_switched[0]}: LoRA adapters only when a command-line option asks for "
            "them; uses_lora not decided"
        )
    elif models:
        rc.emit("uses_lora", False, models[0].where, "no LoRA / PEFT adapters")
    fact = "module_created_after_wrap"
    fw = rc.framework
    said = fw.adapters_before_wrap() if fw is not None else SCRIPT
    if said is not SCRIPT:
        rc.say(fact, said)
        return
    if not a.ddps:
        return
    for ddp in a.ddps:
        refs = {ddp.ref, ddp.wraps}
        hit = _created_after(rc, ddp, refs)
        if hit is None and a.main_backward is None:
            return  # training happens in code the scan cannot see
        if hit is not None:
            where, what = hit
            made = [e for e in a.events if e.where == where]
            if made and all(may_not_run(rc, e) for e in made):
                # ``if args.train_text_encoder: ...requires_grad_(True)`` after the wrap:
                # the change happens only when the run takes that side
                if all(cli_switched(e) and default_runs(e) for e in made):
                    rc.cli_default(fact, True, where)
                else:
                    rc.warn(f"{where}: {what} after the DDP wrap only on one side of an if")
                return
            rc.emit(
                fact,
                True,
                where,
                f"{what} after the DDP wrap at {ddp.where}: DDP never syncs it",
            )
            return
    rc.emit(
        fact,
        False,
        a.ddps[0].where,
        "no modules or trainable parameters added after the DDP wrap",
    )


def _created_after(rc: RuleContext, ddp: Obj, refs: set[int | None]) -> tuple[str, str] | None:
    a = rc.a
    for o in a.objects.values():
        if o.ref in refs:
            for key, what in (
                ("peft", "adapters injected (get_peft_model)"),
                ("syncbn", "SyncBatchNorm conversion"),
            ):
                seq = o.extra.get(key)
                if seq is not None and seq > ddp.seq:
                    ev = a.by_seq.get(seq)
                    return (ev.where if ev else o.where), what
    wrap = a.by_seq.get(ddp.seq)
    for e in a.events:
        if e.seq <= ddp.seq:
            continue
        if wrap is not None and exclusive(e, wrap):
            continue  # the other branch of the if that wraps (e.g. DataParallel in an elif)
        recv = e.recv
        if e.kind == "call":
            target = (
                recv
                if recv is not None and recv.kind in (V.MODEL, V.DDP, V.DDP_MODULE)
                else (e.args[0] if e.args else None)
            )
            name = e.method or apis.last(e.name)
            if name in apis.INJECTORS and target is not None and target.ref in refs:
                return e.where, f"{name}()"
            if (
                name == "setattr"
                and e.args
                and e.args[0].ref in refs
                and len(e.args) > 2
                and e.args[2].kind in (V.MODEL, "new_param")
            ):
                return e.where, "module attached with setattr"
            if (
                name == "requires_grad_"
                and recv is not None
                and recv.kind in (V.PARAMS, V.MODEL, V.DDP_MODULE)
                and recv.ref in refs
            ):
                arg = e.args[0] if e.args else Val(const=True)
                if arg.known and arg.const is True:
                    return e.where, "parameters unfrozen (requires_grad_)"
        elif e.kind == "assign" and recv is not None and recv.ref in refs:
            value = e.value
            if (
                e.attr == "requires_grad"
                and recv.kind == V.PARAMS
                and value is not None
                and value.known
                and value.const is True
            ):
                return e.where, "parameters unfrozen (requires_grad = True)"
            if recv.kind in (V.MODEL, V.DDP_MODULE, V.DDP) and value is not None:
                vobj = rc.obj(value)
                if value.kind == "new_param" or (
                    value.kind == V.MODEL and vobj is not None and vobj.seq > ddp.seq
                ):
                    return e.where, f"module assigned to {e.target}"
    return None


def _trained_models(rc: RuleContext) -> list[Obj]:
    """The models being trained, when every one of them is built in visible code."""
    a = rc.a
    fw = rc.framework
    said = fw.trained_models() if fw is not None else SCRIPT
    if isinstance(said, Script):
        models = [rc.walk.objects[o.wraps] for o in a.ddps if o.wraps in rc.walk.objects]
    else:
        models = said
    if not models or any(m.canon == "unknown-model" for m in models):
        return []
    return models


def _lora_switched(rc: RuleContext, lora: list[str]) -> str | None:
    """Whether every piece of LoRA evidence sits under an ``if`` that may not run: "cli" when
    a command-line option decides it, "open" when the scan cannot decide it (an option of a
    parser it cannot read, a config), None when some evidence always runs."""
    events = [e for e in rc.a.events if e.where in set(lora)]
    if not events or {e.where for e in events} < set(lora):
        return None
    if all(cli_switched(e) for e in events):
        return "cli"
    return "open" if all(may_not_run(rc, e) for e in events) else None

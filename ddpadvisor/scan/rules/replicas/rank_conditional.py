from __future__ import annotations

from ddpadvisor.scan import apis
from ddpadvisor.scan import values as V
from ddpadvisor.scan.analysis import Analysis, recv_text
from ddpadvisor.scan.context import Event
from ddpadvisor.scan.library.views import SCRIPT
from ddpadvisor.scan.rules.base import RuleContext, is_rank_cond
from ddpadvisor.scan.rules.registry import not_in_excerpt, rule


@rule(
    "Whether some ranks alone change the model's or optimizer's state (a rank-0 resume).",
    facts={
        "rank_conditional_state_change": not_in_excerpt(False),
    },
)
def rank_conditional(rc: RuleContext) -> None:
    a = rc.a
    fact = "rank_conditional_state_change"
    fw = rc.framework
    said = fw.rank_conditional_resume() if fw is not None else SCRIPT
    if said is not SCRIPT:
        rc.say(fact, said)
        return
    if _loaded_before_unsynced_fsdp(rc):
        return
    if not a.ddps:
        return
    ddp_seq = min(o.seq for o in a.ddps)
    model_refs = _submodules(rc, {r for o in a.ddps for r in (o.ref, o.wraps)})
    broadcasts = [
        e
        for e in a.calls()
        if apis.last(e.name)
        in ("broadcast", "broadcast_object_list", "_sync_module_states", "sync_module_states")
    ]
    found = False
    other_model = None  # a model outside the wrapper loaded on some ranks only (a teacher)
    other_refs: dict[int, Event] = {}  # its value ref -> the load event
    for e in a.events:
        if not any(is_rank_cond(c) for c in e.ctx):
            continue
        recv = e.recv
        name = e.method or apis.last(e.name)
        what = None
        if e.kind == "call" and name in apis.STATE_LOADERS and recv is not None:
            if recv.kind in (V.OPTIMIZER, V.SCALER, V.SCHEDULER):
                what = f"{recv_text(e) or recv.kind} state loaded on some ranks only"
            elif (
                recv.kind in (V.MODEL, V.DDP, V.DDP_MODULE)
                and e.seq > ddp_seq
                and recv.ref in model_refs
            ):
                what = "weights loaded on some ranks only, after the DDP wrap"
            elif recv.kind == V.ACCELERATOR:
                what = "accelerator state loaded on some ranks only"
            elif recv.kind == V.MODEL and recv.ref not in model_refs:
                other_model = other_model or e.where
                if recv.ref is not None:
                    other_refs.setdefault(recv.ref, e)
        elif e.kind == "call" and name in ("set_peft_model_state_dict",) and e.seq > ddp_seq:
            what = "adapter weights loaded on some ranks only"
        elif (
            e.kind == "call"
            and e.seq > ddp_seq
            and name in apis.PARAM_INPLACE
            and recv is not None
            and recv.kind in (V.PARAMS, V.MODEL, V.DDP_MODULE)
            and recv.ref in model_refs
        ):
            what = f"parameters changed in place ({name}) on some ranks only"
        elif (
            e.kind == "call"
            and e.seq > ddp_seq
            and e.name.startswith("torch.nn.init.")
            and e.args
            and e.args[0].kind == V.PARAMS
            and e.args[0].ref in model_refs
        ):
            what = "parameters re-initialised on some ranks only"
        elif (
            e.kind == "assign"
            and e.seq > ddp_seq
            and e.attr == "data"
            and recv is not None
            and recv.kind == V.PARAMS
            and recv.ref in model_refs
        ):
            what = "parameter data replaced on some ranks only"
        if what is None:
            continue
        if any(bc.seq > e.seq for bc in broadcasts):
            rc.warn(f"{e.where}: {what}, but a broadcast follows; assumed re-synchronised")
            continue
        rc.emit(fact, True, e.where, f"{what} ({e.where}); DDP never re-broadcasts them")
        found = True
    if found or a.main_backward is None:
        return
    for ref, load in other_refs.items():
        if not _runs_in_training(a, ref) or any(bc.seq > load.seq for bc in broadcasts):
            continue
        rc.emit(
            fact,
            True,
            load.where,
            f"weights loaded on some ranks only ({load.where}) into a model the training "
            "forward runs beside the wrapped one (a teacher, a reference model); no wrapper "
            "ever broadcasts it",
        )
        return
    if other_model is not None:
        # whether the training forward runs that model (a distillation teacher, a reference
        # model) or only rank 0's evaluation does is not read here: no verdict
        return
    rc.emit(
        fact,
        False,
        a.ddps[0].where,
        "no state loaded or changed on a subset of ranks after wrapping",
    )


def _runs_in_training(a: Analysis, ref: int) -> bool:
    """Whether a forward of the model ``ref`` feeds a loss that reaches a backward."""
    mark = f"fwdof:{ref}:"
    for e in a.train_forwards:
        taint = e.result.taint if e.result is not None else ()
        if any(t.startswith(mark) for t in taint):
            return True
    return False


def _loaded_before_unsynced_fsdp(rc: RuleContext) -> bool:
    """Weights loaded on some ranks only (``if rank == 0: model.load_state_dict(...)``)
    before an FSDP wrap: DDP broadcasts rank 0's parameters when it wraps, FSDP only with
    ``sync_module_states=True`` (its default is False), so without it the other ranks
    train their own initialisation. Whether it emitted the fact (or warned)."""
    a = rc.a
    fact = "rank_conditional_state_change"
    for f in a.fsdps:
        ev = a.by_seq.get(f.seq)
        if ev is None or apis.last(ev.name) not in ("FullyShardedDataParallel", "FSDP"):
            continue
        inner = _submodules(rc, {f.wraps})
        loads = [
            e
            for e in a.events
            if e.kind == "call"
            and e.seq < f.seq
            and (e.method or apis.last(e.name)) in apis.STATE_LOADERS
            and e.recv is not None
            and e.recv.kind in (V.MODEL, V.DDP_MODULE)
            and e.recv.ref in inner
            and any(is_rank_cond(c) for c in e.ctx)
        ]
        if not loads:
            continue
        sync = ev.kwargs.get("sync_module_states")
        if sync is not None and not sync.known:
            rc.warn(
                f"{ev.where}: weights loaded on some ranks only ({loads[0].where}) before an "
                "FSDP wrap whose sync_module_states the run decides; not decided"
            )
            return True
        if sync is not None and sync.const is True:
            continue
        rc.emit(
            fact,
            True,
            loads[0].where,
            f"weights loaded on some ranks only ({loads[0].where}) before an FSDP wrap without "
            f"sync_module_states=True ({ev.where}): the other ranks keep their own weights",
        )
        return True
    return False


def _submodules(rc: RuleContext, refs: set[int | None]) -> set[int | None]:
    """The wrapped models and the modules held in their attributes (``self.net``), at any
    depth: changing a submodule's weights changes the wrapped model's."""
    out = set(refs)
    todo = [r for r in refs if r is not None]
    while todo:
        obj = rc.walk.objects.get(todo.pop())
        if obj is None:
            continue
        for val in obj.attrs.values():
            if val.kind in (V.MODEL, V.DDP_MODULE) and val.ref is not None and val.ref not in out:
                out.add(val.ref)
                todo.append(val.ref)
    return out

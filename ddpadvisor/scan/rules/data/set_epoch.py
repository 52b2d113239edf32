from __future__ import annotations

import ast

from ddpadvisor.scan import values as V
from ddpadvisor.scan.context import Event
from ddpadvisor.scan.library.views import SCRIPT
from ddpadvisor.scan.rules.base import RuleContext, may_not_run
from ddpadvisor.scan.rules.data._shared import _mentions_rank
from ddpadvisor.scan.rules.registry import not_in_excerpt, rule
from ddpadvisor.scan.values import Obj


@rule(
    "Whether the training sampler's epoch is set on every pass over the loader.",
    facts={
        "calls_set_epoch": not_in_excerpt(False),
    },
)
def set_epoch(rc: RuleContext) -> None:
    fact = "calls_set_epoch"
    fw = rc.framework
    said = fw.sets_epoch() if fw is not None else SCRIPT
    if said is not SCRIPT:
        rc.say(fact, said)
        return
    loader = rc.training_loader()
    if loader is not None and loader.extra.get("accelerate"):
        rc.emit(
            fact,
            True,
            loader.where,
            f"the DataLoader {loader.extra.get('sharded_by', 'accelerator.prepare()')} returns "
            "sets the sampler epoch itself",
        )
        return
    samplers = rc.a.objs(V.DSAMPLER) or _own_distributed_samplers(rc)
    if not samplers:
        return
    sampler = samplers[0]
    if loader is not None:
        for key in ("sampler", "batch_sampler"):
            s = rc.obj(loader.kwargs.get(key))
            if s is not None and s.kind == V.DSAMPLER:
                sampler = s
    shuffle = sampler.kwargs.get("shuffle")
    if shuffle is not None and shuffle.known and shuffle.const is False:
        rc.warn(f"{sampler.where}: DistributedSampler(shuffle=False): set_epoch has no effect")
        return
    # A call on another sampler the scan knows (the validation one) does not count; one on
    # a receiver it cannot trace (``loader.sampler``, a helper's argument) may be this one.
    others = {
        o.ref
        for o in rc.a.objs(V.DSAMPLER, V.SAMPLER)
        if o.ref != sampler.ref and o.ref not in _training_samplers(rc)
    }
    calls = [
        e
        for e in rc.a.calls("set_epoch")
        if not (e.recv is not None and e.recv.ref is not None and e.recv.ref in others)
    ]
    in_loop = [e for e in calls if e.loops()]
    every = [e for e in in_loop if not may_not_run(rc, e, guards=_receiver_names(e))]
    if every:
        rc.emit(fact, True, every[0].where, f"set_epoch called every epoch ({every[0].where})")
        return
    if in_loop:
        # ``if epoch > 0 and cfg.chunked: ...; shuffle(loader, epoch)``: the run's options
        # decide whether the epoch is ever set
        rc.warn(
            f"{in_loop[0].where}: set_epoch called only under a test the run's options decide; "
            "not decided"
        )
        return
    b = rc.a.main_backward
    if b is None:
        return
    if loader is None or loader.ref not in rc.a.training_loaders:
        _loop_not_read(rc, sampler, loader, b)
        return
    epoch_loop, found = rc.a.epoch_loop(loader.ref)
    if not found:
        _loop_not_read(rc, sampler, loader, b)
        return
    if epoch_loop is None:
        rc.warn(f"{sampler.where}: the data is read for one epoch only; set_epoch not needed")
        return
    hidden = rc._opaque_touches({sampler.ref, loader.ref}, epoch_loop)
    if hidden:
        rc.warn(
            f"{hidden[0].where}: the sampler is handed to {hidden[0].name}(); set_epoch not decided"
        )
        return
    if calls:
        rc.emit(
            fact,
            False,
            calls[0].where,
            f"set_epoch called once, outside the epoch loop at {epoch_loop.where}: same order every epoch",
        )
        return
    rc.emit(
        fact,
        False,
        epoch_loop.where,
        f"epoch loop never calls sampler.set_epoch(epoch): every epoch replays the same order "
        f"(sampler at {sampler.where})",
    )


def _receiver_names(e: Event) -> frozenset[str]:
    """The names ``x.set_epoch(...)``'s receiver is written with (``sampler``, ``loader``):
    a test on them checks that the sampler is there, not an option of the run."""
    func = getattr(e.node, "func", None)
    if not isinstance(func, ast.Attribute):
        return frozenset()
    return frozenset(n.id for n in ast.walk(func.value) if isinstance(n, ast.Name))


def _own_distributed_samplers(rc: RuleContext) -> list[Obj]:
    """The project's own DistributedSampler (a Sampler subclass that splits the indices by
    rank and takes the epoch through its own ``set_epoch``, as torch's does), on the loaders
    the training loop reads: it needs set_epoch every epoch just the same."""
    out: list[Obj] = []
    for ref in _training_samplers(rc):
        so = rc.walk.objects.get(ref)
        info = rc._class_of(so)
        if so is None or info is None or so.kind not in (V.SAMPLER, V.INSTANCE):
            continue
        if info.find_method("set_epoch") is not None and _mentions_rank(info.node):
            out.append(so)
    return out


def _training_samplers(rc: RuleContext) -> set[int]:
    """The samplers of the DataLoaders the training loop reads."""
    out: set[int] = set()
    for ref in rc.a.training_loaders:
        loader = rc.walk.objects.get(ref)
        if loader is None:
            continue
        for key in ("sampler", "batch_sampler"):
            s = rc.obj(loader.kwargs.get(key))
            if s is not None:
                out.add(s.ref)
    return out


def _loop_not_read(rc: RuleContext, sampler: Obj, loader: Obj | None, b: Event) -> None:
    """The training loop's batches do not visibly come from the sampler's DataLoader: say
    why set_epoch is not decided (the loader handed to code the scan does not read, or a
    loop whose batches come from elsewhere), never guess."""
    refs: set[int | None] = {sampler.ref}
    refs.update(
        o.ref
        for o in rc.a.objs(V.LOADER)
        if any(rc.obj(o.kwargs.get(k)) is sampler for k in ("sampler", "batch_sampler"))
    )
    hidden = rc._opaque_touches(refs, None)
    if hidden:
        rc.warn(
            f"{hidden[0].where}: the DataLoader is handed to {hidden[0].name}(), which the scan "
            "does not read; which loop reads its batches, and so set_epoch, not decided"
        )
    elif b.loops():
        loop = b.loops()[-1]
        rc.warn(
            f"{loop.where}: the training loop's batches are not traced to the DataLoader with "
            f"the DistributedSampler ({sampler.where}); set_epoch not decided"
        )

from __future__ import annotations

from ddpadvisor.scan import apis
from ddpadvisor.scan import values as V
from ddpadvisor.scan.analysis import Analysis
from ddpadvisor.scan.context import CondCtx
from ddpadvisor.scan.library.views import SCRIPT
from ddpadvisor.scan.rules.base import RuleContext, default_runs, is_rank_cond
from ddpadvisor.scan.rules.registry import not_in_excerpt, rule
from ddpadvisor.scan.values import Obj


@rule(
    "Whether FSDP or a ZeRO optimizer shards the training state.",
    facts={
        "uses_fsdp_or_zero": not_in_excerpt(False),
    },
)
def sharding_framework(rc: RuleContext) -> None:
    a = rc.a
    fact = "uses_fsdp_or_zero"
    fw = rc.framework
    said = fw.shards_state() if fw is not None else SCRIPT
    if said is not SCRIPT:
        rc.say(fact, said)
        return
    if fw is not None and fw.name == "accelerate" and fact in rc.given:
        # prepare() wraps the model as the run's accelerate config says (FSDP, DeepSpeed or
        # DDP), and the run gave that config: it decides, not prepare()'s default reading
        rc.warn(
            f"{fw.where}: accelerator.prepare() wraps the model as the run's accelerate "
            "config says; uses_fsdp_or_zero is the config's"
        )
        return
    ds = rc.ds
    if ds is not None:
        stage = _zero_stage(ds)
        if stage is None:
            rc.warn(f"{ds.where}: DeepSpeed ZeRO stage comes from its config file; not decided")
        else:
            rc.emit(fact, stage > 0, ds.where, f"DeepSpeed ZeRO stage {stage}")
        return
    hits = [o for o in a.objects.values() if o.kind == V.FSDP or o.extra.get("zero")]
    sure = [o for o in hits if not _behind_option(a, o)]
    if sure:
        o = sure[0]
        rc.emit(fact, True, o.where, f"sharded training ({apis.last(o.canon)})")
    elif hits:
        # ``if args.fsdp: task.prepare_fsdp(...) else: DDP(...)``: the wrap is one side of a
        # switch the run's options decide; the other side may be the one the run takes.
        o = hits[0]
        ev = a.by_seq.get(o.seq)
        if ev is not None and (a.ddps or o.extra.get("zero")) and not default_runs(ev):
            rc.cli_default(fact, False, o.where)
        else:
            rc.warn(f"{o.where}: sharded wrap only under an option; uses_fsdp_or_zero not decided")
    elif a.ddps:
        rc.emit(fact, False, a.ddps[0].where, "plain DistributedDataParallel")


def _behind_option(a: Analysis, o: Obj) -> bool:
    """The sharded wrap runs only on one side of an ``if`` whose other side wraps the model
    for plain DDP instead (``if args.fsdp: ... else: DDP(model)``), and the test is a
    command-line option or one the scan cannot decide. An ``if`` whose other side sets up no
    data parallelism at all is read on its distributed side (the job being diagnosed runs
    distributed). A ZeRO optimizer is no alternative to DDP but an option on top of it
    (``if zero_stage == 1: ZeroRedundancyOptimizer(...)``): any such ``if`` counts. Tests of
    the rank or world size never count."""
    ev = a.by_seq.get(o.seq)
    if ev is None:
        return False
    zero = bool(o.extra.get("zero")) and o.kind != V.FSDP
    others = [e for e in (a.by_seq.get(d.seq) for d in a.ddps) if e is not None]
    for c in ev.ctx:
        if not isinstance(c, CondCtx) or is_rank_cond(c) or V.WORLD in c.taint:
            continue
        if c.job in ("all", "none"):
            continue
        if not (c.const is None or V.ARGDEFAULT in c.taint or "cli" in c.taint):
            continue
        if zero or any(
            isinstance(x, CondCtx) and x.node is c.node and x.branch != c.branch
            for e in others
            for x in e.ctx
        ):
            return True
    return False


def _zero_stage(ds: Obj) -> int | None:
    config = ds.kwargs.get("config") or ds.kwargs.get("config_params")
    zero = config.get("zero_optimization") if config is not None else None
    stage = zero.get("stage") if zero is not None else None
    if stage is not None and stage.known and isinstance(stage.const, int):
        return stage.const
    if config is not None and config.mapping is not None and zero is None:
        return 0  # a literal config without zero_optimization
    return None

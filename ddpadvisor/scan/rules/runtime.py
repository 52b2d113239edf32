"""Which framework drives the step, torch.compile and sharded wrappers (kb/causes/runtime.yaml)."""

from __future__ import annotations

from ddpadvisor.scan import apis
from ddpadvisor.scan import values as V
from ddpadvisor.scan.analysis import Analysis, recv_text, text
from ddpadvisor.scan.context import CondCtx, Event
from ddpadvisor.scan.library import hf_trainer
from ddpadvisor.scan.rules.base import (
    RuleContext,
    const,
    default_runs,
    is_rank_cond,
)
from ddpadvisor.scan.rules.registry import ANY_EXCERPT, not_in_excerpt, rule
from ddpadvisor.scan.values import Obj


@rule(
    "Notes which framework (HF Trainer, accelerate, Lightning) drives the step; sets no fact.",
)
def framework_note(rc: RuleContext) -> None:
    if rc.hf:
        tr = rc.trainer()
        rc.warn(
            f"{tr.where if tr else rc.label}: HF Trainer script: data sharding, set_epoch, "
            "accumulation and gradient sync are handled by the framework"
        )
    elif rc.acc:
        acc = rc.a.objs(V.ACCELERATOR)[0]
        rc.warn(
            f"{acc.where}: accelerate script: accelerator.prepare() shards the data and "
            "accelerator.accumulate() handles gradient sync"
        )


def _compiles_a_function(e: Event) -> bool:
    """``@torch.compile(dynamic=True)`` on a helper or ``torch.compile(fn)``: it compiles that
    function, not the model (a project's loss or log-softmax kernel)."""
    if not e.args:
        return True  # the decorator form: it compiles the function defined below it
    return e.args[0].kind in (V.FUNCTION, V.LAMBDA, "method")


@rule(
    "Whether the model is compiled with torch.compile.",
    facts={
        "uses_torch_compile": not_in_excerpt(False),
    },
)
def compile(rc: RuleContext) -> None:
    fact = "uses_torch_compile"
    if rc.hf:
        val, where = rc.hf_arg("torch_compile")
        if val is not None and (val.known or "default" in val.taint):
            rc.emit(fact, const(val) is True, where, "TrainingArguments(torch_compile=…)")
        return
    compiles = [
        e
        for e in rc.a.calls()
        if (
            apis.last(e.name) == "compile"
            and e.name.startswith("torch")
            and not _compiles_a_function(e)
        )
        or (e.method == "compile" and e.recv is not None and e.recv.kind in (V.MODEL, V.DDP))
        # a wrapper's own compile (timm's ``task.compile(backend=...)``) on an object the
        # scan does not know: not a regex or a symbol of another library
        or (
            e.method == "compile"
            and e.recv is not None
            and e.recv.kind in (None, V.INSTANCE)
            and e.name.split(".")[0] not in ("re", "regex", "jax", "tf", "keras")
            and ("backend" in e.kwargs or "mode" in e.kwargs or "fullgraph" in e.kwargs)
        )
    ]
    if not compiles:
        hidden = rc.unreached_calls(lambda n: n in ("torch.compile", "compile"))
        if hidden:
            rc.warn(f"{hidden[0]}: torch.compile in code the scan did not follow; not decided")
            return
        if rc.a.main_backward is not None:
            where = rc.a.ddps[0].where if rc.a.ddps else rc.a.main_backward.where
            rc.emit(fact, False, where, "torch.compile is not used")
        return
    c = compiles[0]
    for cond in c.conds():
        if cond.const is not None:  # a command-line switch: only its default is known
            rc.cli_default(fact, bool(cond.const) == cond.branch, c.where)
            return
        if cond.const is None and not is_rank_cond(cond):
            rc.warn(f"{c.where}: torch.compile only when {text(cond.test)}; not decided")
            return
    order = ""
    target = c.args[0] if c.args else c.recv
    if target is not None and target.kind == V.DDP:
        order = "; compiles the DDP-wrapped model"
    elif rc.a.ddps:
        first = rc.a.ddps[0]
        order = (
            "; compiled before DDP wraps it"
            if c.seq < first.seq
            else "; compiled after the DDP wrap"
        )
    rc.emit(fact, True, c.where, f"torch.compile used ({c.where}){order}")


@rule(
    "Whether the training loop is the script's own rather than a framework's.",
    facts={
        "hand_written_loop": ANY_EXCERPT,
    },
)
def loop_kind(rc: RuleContext) -> None:
    a = rc.a
    fact = "hand_written_loop"
    if rc.hf:
        tr = rc.trainer()
        info = rc._class_of(tr)
        taken = hf_trainer.loop_overrides(info) if info is not None else []
        if taken:
            # the subclass does part of the loop's job itself (loss scaling, sharding): the
            # framework no longer vouches for it, so the fact is left to the other evidence
            rc.warn(
                f"{tr.where if tr else rc.label}: the Trainer subclass overrides "
                f"{', '.join(taken)}; that part of the loop is read as the script's own code"
            )
            return
        rc.emit(fact, False, tr.where if tr else "", "the HF Trainer runs the training loop")
        return
    if rc.acc:
        # kb/facts.yaml: your own loop on accelerate is hand-written; accelerate wraps the
        # model, optimizer and loader, the loop's forward, loss and step are the user's
        acc = a.objs(V.ACCELERATOR)[0]
        rc.emit(fact, True, acc.where, "your own training loop on accelerate")
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
        tr = rc.pl_trainer() if rc.pl else None
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


@rule(
    "Whether FSDP or a ZeRO optimizer shards the training state.",
    facts={
        "uses_fsdp_or_zero": not_in_excerpt(False),
    },
)
def sharding_framework(rc: RuleContext) -> None:
    a = rc.a
    fact = "uses_fsdp_or_zero"
    if rc.hf:
        for key in ("fsdp", "deepspeed"):
            val, where = rc.hf_arg(key)
            if val is not None and val.known and val.const not in (None, "", False):
                rc.emit(fact, True, where, f"TrainingArguments({key}=…)")
                return
        val, where = rc.hf_arg("fsdp")
        if val is not None and ("default" in val.taint or val.known):
            rc.emit(fact, False, where, "TrainingArguments without fsdp/deepspeed")
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

"""Whether the replicas stay identical: wrap order, rank-conditional changes, batch norm and
buffers (kb/causes/replicas.yaml)."""

from __future__ import annotations

import ast
import builtins

from ddpadvisor.scan import apis
from ddpadvisor.scan import values as V
from ddpadvisor.scan.analysis import recv_text
from ddpadvisor.scan.interp import ClassInfo, FuncRef
from ddpadvisor.scan.rules.base import (
    RuleContext,
    cli_switched,
    default_runs,
    exclusive,
    is_rank_cond,
    may_not_run,
)
from ddpadvisor.scan.rules.registry import ANY_EXCERPT, not_in_excerpt, rule
from ddpadvisor.scan.source import dotted
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
    if rc.hf:
        tr = rc.trainer()
        peft_after = [
            o
            for o in a.objects.values()
            if o.extra.get("peft") and tr is not None and o.extra["peft"] > tr.seq
        ]
        if not peft_after:
            rc.emit(
                fact,
                False,
                tr.where if tr else "",
                "the Trainer wraps the model after the adapters exist",
            )
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


@rule(
    "Whether some ranks alone change the model's or optimizer's state (a rank-0 resume).",
    facts={
        "rank_conditional_state_change": not_in_excerpt(False),
    },
)
def rank_conditional(rc: RuleContext) -> None:
    a = rc.a
    fact = "rank_conditional_state_change"
    if rc.hf:
        for e in a.calls("train"):
            if e.recv is None or e.recv.kind != V.TRAINER:
                continue
            ckpt = e.kw("resume_from_checkpoint", 0)
            if ckpt is not None and V.RANK in ckpt.taint:
                rc.emit(
                    fact,
                    True,
                    e.where,
                    f"resume_from_checkpoint differs between ranks ({e.where}): some ranks "
                    "resume the checkpoint's weights and optimizer state, the others start "
                    "fresh",
                )
                return
        rc.emit(fact, False, "", "HF Trainer loads checkpoints on every rank")
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
    rc.emit(
        fact,
        False,
        a.ddps[0].where,
        "no state loaded or changed on a subset of ranks after wrapping",
    )


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


def _trained_models(rc: RuleContext) -> list[Obj]:
    """The models being trained, when every one of them is built in visible code."""
    a = rc.a
    if rc.hf:
        tr = rc.trainer()
        m = rc.obj(tr.kwargs.get("model")) if tr else None
        models = [m] if m is not None else []
    else:
        models = [rc.walk.objects[o.wraps] for o in a.ddps if o.wraps in rc.walk.objects]
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


@rule(
    "Whether the model has BatchNorm layers and whether they become SyncBatchNorm.",
    facts={
        "has_batchnorm": not_in_excerpt(False),
        "uses_syncbn": not_in_excerpt(False),
    },
)
def batchnorm(rc: RuleContext) -> None:
    a = rc.a
    bn: list[str] = []
    bn_objs: list[Obj] = []
    for o in a.objs(V.MODEL):
        arch = o.extra.get("arch")
        if o.extra.get("nn") in apis.BN_CLASSES or (
            isinstance(arch, str) and arch.lower().startswith(apis.BN_MODEL_PREFIXES)
        ):
            bn.append(o.where)
            bn_objs.append(o)
    syncbn = [o.extra["syncbn"] for o in a.objects.values() if o.extra.get("syncbn")]
    syncbn_ctor = [e for e in a.calls() if apis.last(e.name) == "SyncBatchNorm"]
    picked = [o for o in a.objs(V.MODEL) if o.extra.get("chosen_by_default")]
    made = [a.by_seq.get(o.seq) for o in bn_objs]
    optional = bool(made) and all(e is not None and may_not_run(rc, e) for e in made)
    if bn and picked:
        rc.cli_default("has_batchnorm", True, picked[0].where)
    elif optional:
        # ``if use_bn: layers.append(nn.BatchNorm1d(...))`` with use_bn from an option
        first = next(e for e in made if e is not None)
        if all(e is not None and cli_switched(e) and default_runs(e) for e in made):
            rc.cli_default("has_batchnorm", True, first.where)
        else:
            rc.warn(f"{first.where}: BatchNorm is built only on one side of an if; not decided")
    elif bn:
        rc.emit("has_batchnorm", True, bn[0], f"BatchNorm layers ({bn[0]})")
    elif by_default := _arch_by_default(rc):
        o, has = by_default
        rc.cli_default("has_batchnorm", has, o.where)
    elif _model_known_without_bn(rc):
        models = [o for o in a.objs(V.MODEL) if o.wrapped_by] or a.objs(V.MODEL)
        rc.emit(
            "has_batchnorm",
            False,
            models[0].where if models else "",
            "no BatchNorm in the model",
        )
    if syncbn or syncbn_ctor:
        events = [a.by_seq[s] for s in syncbn if s in a.by_seq] + syncbn_ctor
        where = events[0].where if events else ""
        if events and all(cli_switched(e) for e in events):
            # ``if args.sync_bn: convert_sync_batchnorm(...)``: the run's flags decide.
            rc.warn(f"{where}: SyncBatchNorm conversion depends on a command-line switch")
            return
        if events and all(may_not_run(rc, e) for e in events):
            # ``if utils.has_batchnorms(model): convert...``: runs only when the if holds
            rc.warn(f"{where}: SyncBatchNorm conversion runs only on one side of an if")
            return
        rc.emit("uses_syncbn", True, where, "converted to SyncBatchNorm")
    elif bn and (a.ddps or rc.hf):
        where = a.ddps[0].where if a.ddps else bn[0]
        rc.emit(
            "uses_syncbn",
            False,
            where,
            f"BatchNorm not converted to SyncBatchNorm before the DDP wrap ({where})",
        )


def _arch_by_default(rc: RuleContext) -> tuple[Obj, bool] | None:
    """A model chosen by a name that is only a command-line default (``create_model(
    args.model)``, ``--model resnet50``): what that default would mean, for the --set note."""
    for o in rc.a.objs(V.MODEL):
        name = str(o.extra.get("arch_default") or "").lower()
        if not name:
            continue
        if name.startswith(apis.BN_MODEL_PREFIXES):
            return o, True
        if name.startswith(apis.NO_BN_MODEL_PREFIXES):
            return o, False
    return None


def _model_known_without_bn(rc: RuleContext) -> bool:
    a = rc.a
    models = [rc.walk.objects[o.wraps] for o in a.ddps if o.wraps in rc.walk.objects]
    if not models:
        if rc.hf:
            tr = rc.trainer()
            m = rc.obj(tr.kwargs.get("model")) if tr else None
            models = [m] if m is not None else []
        else:
            return False
    seen: set[int] = set()
    return all(_model_known(rc, m, seen) for m in models)


def _model_known(rc: RuleContext, m: Obj, seen: set[int]) -> bool:
    """A model built in code the scan read down to torch.nn layers, including the sub-models
    handed to its constructor (``DETR(backbone, transformer)``: the backbone is built
    elsewhere, by a factory the class never names)."""
    if m.ref in seen:
        return True
    seen.add(m.ref)
    if m.canon == "unknown-model":
        return False
    hf = m.extra.get("hf_class")
    arch = m.extra.get("arch")
    if hf is not None:
        # a text model (any class, or a causal-LM auto class), or a class known to be built
        # from GroupNorm/LayerNorm only; any other class may hold BatchNorm
        return any(h in hf for h in (*apis.HF_TEXT_MODEL_HINTS, *apis.HF_NO_BN_CLASS_HINTS))
    if arch is not None:
        return str(arch).lower().startswith(apis.NO_BN_MODEL_PREFIXES)
    if m.extra.get("chosen_by_default"):
        return False  # a class picked from a table by a command-line default
    if m.canon.startswith("local:"):
        info = rc._class_of(m)
        if info is None or not _class_tree_known(rc, info, set()):
            return False
        for val in [*m.args, *m.kwargs.values(), *m.attrs.values()]:
            if val.kind in (V.MODEL, V.DDP_MODULE, V.INSTANCE) and val.ref not in (None, m.ref):
                sub = rc.walk.objects.get(val.ref)
                if sub is not None and not _model_known(rc, sub, seen):
                    return False
        return True
    return m.canon.startswith("torch.nn.")


def _class_calls(rc: RuleContext, info: ClassInfo) -> list[tuple[ast.Call, str]]:
    if rc._by_class is None:
        rc._by_class = {}
        modules = [rc.walk.sources.main, *rc.walk.sources.modules.values()]
        for m in modules:
            for call, name, cls in m.index.calls:
                if cls is not None:
                    rc._by_class.setdefault(id(cls), []).append((call, name))
    return rc._by_class.get(id(info.node), [])


def _class_tree_known(rc: RuleContext, info: ClassInfo, seen: set[int]) -> bool:
    """Every sub-module the class builds is from torch.nn or another class the scan reads. A
    layer built by a value the scan cannot name (``block(...)`` of a parameter,
    ``getattr(nn, name)(...)``, ``eval(m)(...)`` from a YAML file, ``registry[name](...)``, a
    builder imported from code it does not read such as ``build_norm_layer(cfg)``) may be a
    BatchNorm: the tree is not known."""
    if id(info) in seen:
        return True
    seen.add(id(info))
    glob = info.scope.globals
    for cls in info.mro():
        for call, name in _class_calls(rc, cls):
            if not _call_known(rc, call, name, glob, seen, 0):
                return False
    return True


_SAFE_CANON = ("torch", "math", "dataclasses", "collections", "typing", "functools", "itertools")


def _call_known(
    rc: RuleContext,
    call: ast.Call,
    name: str,
    glob: dict[str, Val],
    seen: set[int],
    depth: int,
) -> bool:
    """Whether this call inside a model's code cannot build a layer the scan does not see."""
    if not name:
        func = call.func
        # ``registry[name](...)``, ``getattr(nn, kind)(...)``, ``eval(m)(...)``: built by name
        return not isinstance(func, (ast.Subscript, ast.Call))
    head = name.split(".")[0]
    if head in ("self", "cls", "super"):
        return True  # the class's own methods are read with it
    val = glob.get(head)
    if val is None:
        if "." in name:
            return True  # a method of a local value (x.view, layers.append)
        if name in _BUILD_BY_TEXT:
            return False
        # a builtin, or a local name or parameter called as a constructor (``block(...)``,
        # ``norm_layer(dim)``): a layer class chosen by the caller
        return name in _BUILTINS
    if val.kind == "class" and isinstance(val.const, ClassInfo):
        return val.const.object_kind() != V.MODEL or _class_tree_known(rc, val.const, seen)
    if val.kind == V.FUNCTION and isinstance(val.const, FuncRef):
        return depth < 4 and _function_known(rc, val.const, seen, depth + 1)
    canon = (val.canon or "") + name[len(head) :] if val.kind == "symbol" else ""
    if canon.startswith("torch.nn.") or name.startswith("nn."):
        return True
    if canon:
        return canon.startswith(_SAFE_CANON)
    return True  # a constant or data value of the module's own


def _function_known(rc: RuleContext, ref: FuncRef, seen: set[int], depth: int) -> bool:
    """A helper of the model's module (``def conv_bn(...)``): its calls, read the same way."""
    if id(ref.node) in seen:
        return True
    seen.add(id(ref.node))
    glob = ref.scope.globals
    for sub in ast.walk(ref.node):
        if isinstance(sub, ast.Call) and not _call_known(
            rc, sub, dotted(sub.func), glob, seen, depth
        ):
            return False
    return True


_BUILD_BY_TEXT = {"eval", "exec", "__import__"}
_BUILTINS = frozenset(dir(builtins)) - _BUILD_BY_TEXT


@rule(
    "Whether the DDP wrap turns broadcast_buffers off.",
    facts={
        "broadcast_buffers_disabled": ANY_EXCERPT,  # off the DDP constructor's keywords
    },
)
def broadcast_buffers(rc: RuleContext) -> None:
    fact = "broadcast_buffers_disabled"
    if rc.hf:
        val, where = rc.hf_arg("ddp_broadcast_buffers")
        if val is not None and val.known and val.const is not None:
            rc.emit(
                fact,
                val.const is False,
                where,
                f"TrainingArguments(ddp_broadcast_buffers={val.const})",
            )
        return
    for e in rc.a.calls():
        if apis.last(e.name) == "DistributedDataParallelKwargs":
            bb = e.kwargs.get("broadcast_buffers")
            if bb is not None and bb.known:
                rc.emit(
                    fact,
                    bb.const is False,
                    e.where,
                    f"DistributedDataParallelKwargs(broadcast_buffers={bb.const})",
                )
                return
    for o in rc.a.ddps:
        if o.extra.get("accelerate") or o.extra.get("deepspeed"):
            continue
        bb = o.kwargs.get("broadcast_buffers")
        if bb is None:
            rc.emit(fact, False, o.where, "DDP keeps the default broadcast_buffers=True")
        elif bb.known:
            if bb.const is False:
                rc.emit(
                    fact,
                    True,
                    o.where,
                    f"DDP(broadcast_buffers=False) at {o.where}: buffers drift per rank",
                )
            else:
                rc.emit(fact, False, o.where, "DDP(broadcast_buffers=True)")
        return

from __future__ import annotations

import ast
import builtins

from ddpadvisor.scan import apis
from ddpadvisor.scan import values as V
from ddpadvisor.scan.interp import ClassInfo, FuncRef
from ddpadvisor.scan.library.views import SCRIPT, Script
from ddpadvisor.scan.rules.base import RuleContext, cli_switched, default_runs, may_not_run
from ddpadvisor.scan.rules.registry import not_in_excerpt, rule
from ddpadvisor.scan.source import dotted
from ddpadvisor.scan.values import Obj, Val


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
        fw = rc.framework
        said = fw.trained_models() if fw is not None else SCRIPT
        if isinstance(said, Script):
            return False
        models = said
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

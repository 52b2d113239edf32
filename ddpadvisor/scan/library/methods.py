"""Methods called on objects the script built (``optimizer.step()``, ``accelerator.prepare(...)``,
``parser.add_argument(...)``)."""

from __future__ import annotations

import ast
import contextlib
from dataclasses import replace
from typing import TYPE_CHECKING

from ddpadvisor.scan import apis
from ddpadvisor.scan import values as V
from ddpadvisor.scan.context import Ctx, Event, LoopCtx
from ddpadvisor.scan.interp.frames import ClassInfo, Frame, FuncRef
from ddpadvisor.scan.values import UNKNOWN, Obj, Val, merge

if TYPE_CHECKING:
    from ddpadvisor.scan.interp.core import WalkerCore as Walker
from ddpadvisor.scan.library import configs, lightning
from ddpadvisor.scan.library.common import TENSOR_SAME, TRAINING_ARGS, wrap


def method_call(w: Walker, ev: Event, recv: Val, method: str, frame: Frame, ctx: Ctx) -> Val:
    kind = recv.kind
    args = ev.args
    node = ev.node
    assert isinstance(node, ast.Call)
    a0 = args[0] if args else None
    obj = w.obj(recv)

    if kind == SUBMITIT_EXECUTOR:
        return _submitit_method(w, ev, method, frame, ctx)
    if (
        kind is None
        and recv.ref is None
        and method in ("append", "extend", "insert", "add")
        and args
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
    ):
        # ``values.append(loss_dict[k])``: the list now holds what was put in it.
        grown = Val(taint=recv.taint | merge(*args).taint, ops=recv.ops)
        w.rebind(node.func.value, grown, frame)
        return UNKNOWN
    if kind in (V.DDP, V.FSDP, V.MODEL, V.DDP_MODULE):
        if method == "module" and kind in (V.DDP, V.FSDP):
            # ``model.module(x)``: a call of the wrapped module itself, around the wrapper.
            inner = obj.wraps if obj is not None and obj.wraps is not None else recv.ref
            return w.forward(Val(kind=V.DDP_MODULE, ref=inner), ev)
        if method == "forward":
            return w.forward(recv, ev)
        if method == "no_sync":
            return Val(kind=V.CTX_NO_SYNC, ref=recv.ref)
        if method == "join":
            return Val(kind=V.CTX_NULL)
        if method in ("half", "bfloat16", "to", "type", "float"):
            dtype = None
            if method in ("half", "bfloat16", "float"):
                dtype = {"half": "fp16", "bfloat16": "bf16", "float": "fp32"}[method]
            else:
                for a in [*args, *ev.kwargs.values()]:
                    dtype = dtype or apis.dtype_of(a.canon)
                for a in [*args, *ev.kwargs.values()]:
                    if dtype is None and a.kind == V.ALTERNATIVES and a.items:
                        # ``bfloat16 if <the GPU supports it> else float32``: one of them
                        picked = {apis.dtype_of(i.canon) for i in a.items}
                        if picked - {None}:
                            dtype = picked.pop() if len(picked) == 1 else "unknown"
            if dtype is not None and obj is not None:
                # ``self.transformer.wte.to(dtype=bf16)``: a layer of the model stands for the
                # model (see the attribute walk), but casting it leaves the rest as it was
                key = "part_casts" if _submodule(w, node, recv, frame) else "casts"
                obj.extra.setdefault(key, []).append((dtype, ev))
            return recv
        if method in ("cuda", "cpu", "train", "eval", "double", "requires_grad_", "share_memory"):
            return recv
        if method == "compile":
            if obj is not None:
                obj.extra.setdefault("compiled", ev.seq)
            return UNKNOWN
        if method in ("parameters", "modules", "buffers", "children"):
            return Val(kind=V.PARAMS, ref=recv.ref)
        if method in ("named_parameters", "named_modules", "named_buffers", "named_children"):
            return Val(kind="named_params", ref=recv.ref)
        if method == "state_dict":
            return Val(kind="state")
        if method in apis.MODEL_NON_FORWARD:
            return merge(*args, *ev.kwargs.values())
        if method == "optimizers" and obj is not None and "pl_optimizers" in obj.extra:
            opts: list[Val] = obj.extra["pl_optimizers"]
            return opts[0] if len(opts) == 1 else Val(items=tuple(opts))
        if method in ("optimizers", "lr_schedulers", "log", "log_dict", "clip_gradients"):
            return UNKNOWN  # LightningModule plumbing, not a forward pass
        return w.forward(recv, ev)

    if method in ("parse_args", "parse_known_args") and obj is not None:
        parsed = _typed_argument_class(obj, recv, method)
        if parsed is not None:
            return parsed
    if kind == V.SCALER:
        if method == "scale" and a0 is not None:
            return a0.with_taint("scaled")
        return UNKNOWN
    if kind == V.ACCELERATOR:
        return _accelerator_method(w, ev, recv, method, frame)
    if kind == V.PL_TRAINER and method == "fit":
        return _lightning_fit(w, ev, recv, frame, ctx)
    if kind == V.ARGPARSER:
        return _parser_method(w, ev, recv, method, frame)
    if kind is None and method in ("parse_args", "parse_known_args"):
        # A parser handed through a helper the scan cannot read (``parser = wrap(parser)``):
        # its values come from the command line, defaults unknown.
        ns = w.new_obj(V.ARGS, node, frame, canon="argparse.Namespace")
        out = Val(kind=V.ARGS, ref=ns.ref)
        return Val(items=(out, UNKNOWN)) if method == "parse_known_args" else out
    if kind == V.DATASET and method == "shard":
        index = ev.kwargs.get("index", args[1] if len(args) > 1 else None)
        new = w.new_obj(V.DATASET, node, frame, canon="shard", kwargs=dict(ev.kwargs))
        new.extra["sharded"] = index is not None and V.RANK in index.taint
        return Val(kind=V.DATASET, ref=new.ref)
    if kind == V.DATASET and method in (
        "map",
        "filter",
        "shuffle",
        "select",
        "with_format",
        "with_transform",
        "set_format",
        "to_iterable_dataset",
        "train_test_split",
        "remove_columns",
        "rename_column",
        "rename_columns",
        "skip",
        "take",
        "sort",
        "flatten",
        "cast",
        "cast_column",
    ):
        return recv
    if kind in (V.OPTIMIZER, V.SCHEDULER, V.TRAINER, V.LOADER, V.DSAMPLER, V.SAMPLER):
        if method == "state_dict":
            return Val(kind="state")
        return UNKNOWN
    if kind in ("param_groups",):
        return UNKNOWN

    # Tensors and numbers flowing out of the model or the data.
    base = recv.plain()
    if method == "detach":
        # the value is the same (a logged loss stays a loss), but no backward through it
        # reaches the forwards it came from (``fwdof:``: a GAN's ``fake.detach()`` inside
        # ``torch.cat([real, fake.detach()])`` ties the discriminator's loss to no generator)
        return replace(base, taint=frozenset(t for t in base.taint if not t.startswith("fwdof:")))
    if method in TENSOR_SAME:
        return replace(base, taint=base.taint | ({V.ITEM} if method == "item" else set()))
    if method in ("sum", "nansum"):
        taint = set(base.taint)
        if V.FWD in taint:
            taint.discard(V.MEAN_RED)
            taint.add(V.SUM_RED)
        elif V.DATA in taint:
            taint.add(V.TOKENS)
        if _gathered_only(taint):
            taint.add(V.summed_label(base, V.REDUCED_SUM))  # every rank's value, added up
        return Val(taint=frozenset(taint), ops=base.ops)
    if method in ("numel", "count_nonzero") and V.DATA in base.taint:
        return Val(taint=base.taint | {V.TOKENS})
    if method in ("mean", "nanmean"):
        taint = set(base.taint)
        if V.FWD in taint:
            taint.discard(V.SUM_RED)
            taint.add(V.MEAN_RED)
        if _gathered_only(taint):
            taint.add(V.REDUCED_AVG)  # the mean of every rank's value
        return Val(taint=frozenset(taint), ops=base.ops)
    if method in ("div", "div_", "true_divide", "mul", "mul_") and a0 is not None:
        op: ast.operator = ast.Div() if method.startswith(("div", "true")) else ast.Mult()
        arg_node = node.args[0] if node.args else None
        out = w.binop(op, recv, a0, arg_node if isinstance(arg_node, ast.expr) else None)
        if method.endswith("_") and isinstance(node.func, ast.Attribute):
            w.rebind(node.func.value, out, frame)
        return out
    if method in ("chunk", "tensor_split") and a0 is not None and a0.known:
        # x.chunk(K): K micro-batches
        return Val(kind="sized", items=(base, a0), taint=base.taint)
    if (
        method in ("get", "pop", "setdefault")
        and recv.mapping is not None
        and a0 is not None
        and a0.known
    ):
        got = recv.get(str(a0.const))
        if got is not None:
            return got
        return args[1] if len(args) > 1 else UNKNOWN
    if method in ("get", "getenv") and recv.canon == "os.environ" and a0 is not None and a0.known:
        return w._env(str(a0.const), args[1] if len(args) > 1 else None)
    return merge(recv.plain(), *args, *ev.kwargs.values())


SUBMITIT_EXECUTOR = "submitit_executor"


def _submitit_method(w: Walker, ev: Event, method: str, frame: Frame, ctx: Ctx) -> Val:
    """A submitit executor: ``submit(fn, *args, **kwargs)`` runs ``fn(*args, **kwargs)`` in
    every task of the job (a function, or an object of the project's class through its
    ``__call__``); ``batch()`` is a context that only groups submissions. ``map_array`` runs one
    job per element: read once, with an element of each iterable."""
    if method == "batch":
        return Val(kind=V.CTX_NULL)
    if method not in ("submit", "map_array") or not ev.args:
        return UNKNOWN
    fn, rest = ev.args[0], list(ev.args[1:])
    if method == "map_array":
        rest = [w.element_of(a, None) for a in rest]
    node = ev.node if isinstance(ev.node, ast.Call) else None
    out = call_value(w, fn, rest, dict(ev.kwargs), node, frame, ctx)
    if out is None:
        w.warnings.append(
            f"{ev.where}: the job submitted here runs code the scan cannot name; not followed"
        )
        return UNKNOWN
    return out


def call_value(
    w: Walker,
    fn: Val,
    args: list[Val],
    kwargs: dict[str, Val],
    node: ast.Call | None,
    frame: Frame,
    ctx: Ctx,
) -> Val | None:
    """Call a callable value a launcher is handed (a function of the project, a bound method,
    an object whose class defines ``__call__``, a ``partial`` of one); None when the scan
    cannot read it."""
    if fn.kind == V.PARTIAL and fn.items:
        return call_value(
            w, fn.items[0], [*fn.items[1:], *args], {**dict(fn.mapping or ()), **kwargs},
            node, frame, ctx,
        )  # fmt: skip
    if fn.kind in (V.FUNCTION, V.LAMBDA) and isinstance(fn.const, FuncRef):
        return w.inline(fn.const, args, kwargs, None, node, frame, ctx)
    if fn.kind == "method" and isinstance(fn.const, FuncRef) and fn.items:
        return w.inline(fn.const, args, kwargs, fn.items[0], node, frame, ctx)
    obj = w.obj(fn)
    info = obj.extra.get("class") if obj is not None else None
    if isinstance(info, ClassInfo):
        found = info.find_method("__call__")
        if found is not None:
            ref = FuncRef(found[1], found[0].scope, None, owner=found[0])
            return w.inline(ref, args, kwargs, fn, node, frame, ctx)
    return None


def _accelerator_method(w: Walker, ev: Event, recv: Val, method: str, frame: Frame) -> Val:
    node = ev.node
    a0 = ev.args[0] if ev.args else None
    acc = w.obj(recv)
    if acc is not None and acc.extra.get("fabric"):
        if method == "setup_dataloaders":
            return _fabric_loaders(w, ev, frame)
        if method == "autocast":
            return Val(kind=V.CTX_AUTOCAST, const=("unknown", "on"))
        if method == "all_reduce" and a0 is not None:
            op = ev.kwargs.get("reduce_op")
            mean = op is None or (op.known and op.const == "mean")
            label = V.REDUCED_AVG if mean else V.REDUCED_SUM
            return Val(taint=V.reduced(a0, label), ops=a0.ops)
        if method in ("setup", "setup_module"):
            out = [_fabric_setup(w, ev, a, frame, acc) for a in ev.args]
            return out[0] if len(out) == 1 else Val(items=tuple(out))
        if method not in lightning.FABRIC_METHODS:
            return UNKNOWN
        method = lightning.FABRIC_METHODS[method]
    if method in (
        "prepare",
        "prepare_model",
        "prepare_optimizer",
        "prepare_data_loader",
        "prepare_scheduler",
    ):
        out = [_prepared(w, ev, a, frame, acc) for a in ev.args]
        if len(out) == 1:
            return out[0]
        return Val(items=tuple(out))
    if method == "accumulate":
        return Val(kind=V.CTX_ACCUMULATE, ref=a0.ref if a0 else None)
    if method == "no_sync":
        return Val(kind=V.CTX_NO_SYNC, ref=a0.ref if a0 else None)
    if method == "autocast":
        mp = acc.kwargs.get("mixed_precision") if acc is not None else None
        dtype = (
            {"fp16": "fp16", "bf16": "bf16", "no": "fp32"}.get(str(mp.const))
            if mp is not None and mp.known
            else "unknown"
        )
        return Val(kind=V.CTX_AUTOCAST, const=(dtype, "on"))
    if method in ("gather", "gather_for_metrics", "reduce") and a0 is not None:
        red = ev.kwargs.get("reduction") or (ev.args[1] if len(ev.args) > 1 else None)
        label = V.GATHERED
        if method == "reduce":
            label = V.REDUCED_AVG if red is not None and red.const == "mean" else V.REDUCED_SUM
        taint = set(V.reduced(a0, label))
        if V.TOKENS in a0.taint:
            taint.add(V.GLOBAL_TOKENS)
        return Val(taint=frozenset(taint), ops=a0.ops)
    if method == "unwrap_model" and a0 is not None:
        inner = w.obj(a0)
        ref = inner.wraps if inner is not None and inner.wraps is not None else a0.ref
        return Val(kind=V.DDP_MODULE, ref=ref)
    del node
    return UNKNOWN


def _fabric_setup(w: Walker, ev: Event, val: Val, frame: Frame, fabric: Obj) -> Val:
    """``fabric.setup(model, optimizer)``: the model wrapped by Fabric's strategy (DDP for
    ``"ddp*"`` or the default ``"auto"`` on several devices, FSDP for ``"fsdp"``); under
    another strategy (DeepSpeed, one chosen at run time) the wrap is left unknown."""
    if val.kind not in (V.MODEL, V.DDP_MODULE):
        return val
    strategy = fabric.kwargs.get("strategy")
    name = "auto" if strategy is None else strategy.const if strategy.known else None
    if not isinstance(name, str) or V.ARGDEFAULT in (strategy.taint if strategy else ()):
        return val
    if name.startswith("fsdp"):
        kind = V.FSDP
    elif name == "auto" or name.startswith("ddp"):
        kind = V.DDP
    else:
        return val
    out = wrap(w, ev, frame, "lightning.Fabric.setup", val, kind)
    obj = w.obj(out)
    if obj is not None:
        obj.extra["accelerate"] = True
    return out


def _fabric_loaders(w: Walker, ev: Event, frame: Frame) -> Val:
    """``fabric.setup_dataloaders(*loaders)``: each gets a DistributedSampler unless
    ``use_distributed_sampler=False``."""
    flag = ev.kwargs.get("use_distributed_sampler")
    shard = flag is None or (flag.known and flag.const is True)
    out: list[Val] = []
    for val in ev.args:
        obj = w.obj(val)
        if obj is not None and shard:
            obj.extra["accelerate"] = True
            obj.extra["sharded_by"] = "fabric.setup_dataloaders()"
        out.append(val)
    return out[0] if len(out) == 1 else Val(items=tuple(out))


def _prepared(w: Walker, ev: Event, val: Val, frame: Frame, acc: object) -> Val:
    if val.kind in (V.MODEL, V.DDP_MODULE):
        out = wrap(w, ev, frame, "accelerate.Accelerator.prepare", val, V.DDP)
        obj = w.obj(out)
        if obj is not None:
            obj.extra["accelerate"] = True
        return out
    obj = w.obj(val)
    if obj is not None:
        obj.extra["accelerate"] = True
    return val


# Lightning's fit(): the hooks it calls on the LightningModule after the strategy wrapped it in
# DDP, in its order (lightning/pytorch/trainer/trainer.py _run, loops/fit_loop.py,
# loops/training_epoch_loop.py). training_step's return value is the loss Lightning backwards.
_LIGHTNING_HOOKS = (
    "configure_optimizers",
    "on_fit_start",
    "on_train_start",
    "on_train_epoch_start",
    "on_train_batch_start",
    "training_step",
    "on_train_batch_end",
    "on_train_epoch_end",
)


def _lightning_fit(w: Walker, ev: Event, recv: Val, frame: Frame, ctx: Ctx) -> Val:
    trainer = w.obj(recv)
    module = ev.args[0] if ev.args else ev.kwargs.get("model")
    mobj = w.obj(module)
    if trainer is None or module is None or mobj is None:
        return UNKNOWN
    info = mobj.extra.get("class")
    if not isinstance(info, ClassInfo):
        return UNKNOWN
    strategy = trainer.kwargs.get("strategy")
    wrapped = module
    if strategy is None or not strategy.known or "ddp" in str(strategy.const):
        wrapped = wrap(w, ev, frame, "lightning.Trainer.fit", module, V.DDP)
        wobj = w.obj(wrapped)
        if wobj is not None:
            wobj.extra["lightning"] = True
    loader = ev.args[1] if len(ev.args) > 1 else ev.kwargs.get("train_dataloaders")
    hooks: dict[str, Val] = {}
    found = info.find_method("train_dataloader")
    if loader is None and found is not None:
        ref = FuncRef(found[1], found[0].scope, None, owner=found[0])
        loader = w.inline(ref, [], {}, module, ev.node, frame, ctx)  # type: ignore[arg-type]
    if loader is not None:
        trainer.extra["train_loader"] = loader
    manual = _manual_optimization(info)
    for name in _LIGHTNING_HOOKS:
        found = info.find_method(name)
        if found is None:
            continue
        ref = FuncRef(found[1], found[0].scope, None, owner=found[0])
        args: list[Val] = []
        at = ctx
        if name == "training_step":
            batch = w.element_of(loader, None) if loader is not None else UNKNOWN
            args = [batch, UNKNOWN]
            if manual:
                # Manual optimization: the step, zero_grad and any accumulation are the user's
                # code, run once per batch; the batch loop Lightning drives is made explicit so
                # the loop rules read training_step as the body of a hand-written loop.
                at = (*ctx, _batch_loop(ev, frame, loader, found[1]))
        # Lightning, not the fit() call, passes the hook's arguments: none are fit's own
        # argument expressions (batch_idx must stay a name the loop conditions can test).
        call = None if name == "training_step" else ev.node
        hooks[name] = w.inline(ref, args, {}, module, call, frame, at)  # type: ignore[arg-type]
        if name == "configure_optimizers":
            mobj.extra["pl_optimizers"] = _optimizers_in(hooks[name])
    trainer.extra["fit"] = ev
    trainer.extra["hooks"] = hooks
    trainer.extra["manual"] = manual
    return UNKNOWN


def _batch_loop(ev: Event, frame: Frame, loader: Val | None, step: ast.AST) -> LoopCtx:
    """The loop over the training batches that Lightning's fit runs around training_step;
    training_step's second parameter is its batch index."""
    params = step.args.args if isinstance(step, (ast.FunctionDef, ast.AsyncFunctionDef)) else []
    index = params[2].arg if len(params) > 2 else None
    node = ev.node
    return LoopCtx(
        node,
        frame.scope.module.label,
        getattr(node, "lineno", 0),
        loader if loader is not None else UNKNOWN,
        None,
        index,
        over_loader=True,
    )


def _optimizers_in(val: Val) -> list[Val]:
    """The optimizers configure_optimizers returns: one, a list or tuple of them (first element
    of an (optimizers, schedulers) pair), or dicts with an "optimizer" key."""
    if val.kind == V.OPTIMIZER:
        return [val]
    found = val.get("optimizer")
    if found is not None:
        return _optimizers_in(found)
    out: list[Val] = []
    for item in val.items or ():
        out.extend(_optimizers_in(item))
    return out


def _manual_optimization(info: ClassInfo) -> bool | None:
    """``self.automatic_optimization = False`` anywhere in the module's class: the user's
    training_step runs backward and step itself (Lightning's manual optimization)."""
    for cls in info.mro():
        for node in ast.walk(cls.node):
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Attribute) and t.attr == "automatic_optimization"
                for t in node.targets
            ):
                value = node.value
                return isinstance(value, ast.Constant) and value.value is False
    # self.manual_backward() only works under manual optimization (a class cut short, as in a
    # forum post, may not show the switch itself)
    return any(
        isinstance(node, ast.Attribute) and node.attr == "manual_backward"
        for cls in info.mro()
        for node in ast.walk(cls.node)
    )


def _typed_argument_class(obj: Obj, recv: Val, method: str) -> Val | None:
    """``Args(...).parse_args()`` on a project class over a parser base the scan does not read
    (typed-argument-parser's ``class Args(Tap): fp16: int = 0``): its annotated fields are
    command-line options, so their values are defaults the run may override, not constants."""
    info = obj.extra.get("class")
    if not isinstance(info, ClassInfo) or info.find_method(method) is not None:
        return None
    if not info.external_bases():
        return None
    for cls in info.mro():
        for name in cls.fields:
            if name in obj.attrs and V.ARGDEFAULT in obj.attrs[name].taint:
                continue
            default = info.find_attr(name)
            obj.attrs[name] = (
                replace(default, taint=default.taint | {V.ARGDEFAULT})
                if default is not None
                else Val(taint=frozenset({V.ARGDEFAULT}))
            )
    return Val(items=(recv, UNKNOWN)) if method == "parse_known_args" else recv


def _parser_method(w: Walker, ev: Event, recv: Val, method: str, frame: Frame) -> Val:
    parser = w.obj(recv)
    node = ev.node
    if parser is None:
        return UNKNOWN
    if method in ("add_argument_group", "add_mutually_exclusive_group"):
        return recv
    if method == "add_argument":
        names = [str(a.const) for a in ev.args if a.known and isinstance(a.const, str)]
        dest_val = ev.kwargs.get("dest")
        if dest_val is not None and dest_val.known:
            dest = str(dest_val.const)
        else:
            longs = [x for x in names if x.startswith("--")]
            shorts = [x for x in names if x.startswith("-")]
            pick = longs[0] if longs else shorts[0] if shorts else names[0] if names else ""
            dest = pick.lstrip("-").replace("-", "_")
        action = ev.kwargs.get("action")
        default = ev.kwargs.get("default")
        if default is None:
            if action is not None and action.const == "store_true":
                default = Val(const=False)
            elif action is not None and action.const == "store_false":
                default = Val(const=True)
            else:
                default = Val(const=None)
        typ = ev.kwargs.get("type")
        if default.known and isinstance(default.const, str) and typ is not None:
            conv = {"int": int, "float": float}.get(apis.last(typ.canon or ""))
            if conv is not None:
                with contextlib.suppress(ValueError):
                    default = Val(const=conv(default.const))
        if dest:
            parser.extra["defaults"][dest] = default
        return UNKNOWN
    if method == "set_defaults":
        parser.extra["defaults"].update(ev.kwargs)
        return UNKNOWN
    if method in ("parse_args", "parse_known_args"):
        ns = w.new_obj(V.ARGS, node, frame, canon="argparse.Namespace")
        ns.extra["parser"] = parser.ref
        out = Val(kind=V.ARGS, ref=ns.ref)
        if method == "parse_known_args":
            return Val(items=(out, UNKNOWN))
        return out
    if method in (
        "parse_args_into_dataclasses",
        "parse_yaml_file",
        "parse_json_file",
        "parse_dict",
    ):
        values = _config_values(w, ev, method, frame)
        items = []
        for dc in parser.extra.get("dataclasses", []):
            items.append(_from_cli(w, dc, ev, frame, values))
        return Val(items=tuple(items)) if len(items) != 1 else items[0]
    return UNKNOWN


def _config_values(w: Walker, ev: Event, method: str, frame: Frame) -> dict[str, Val] | None:
    """The values HfArgumentParser reads from a config the scan can see: a dict literal
    (``parse_dict``) or a JSON/YAML file whose path is a constant or sits next to the script
    (``parse_json_file``/``parse_yaml_file``). None: the values come from the command line."""
    if method == "parse_args_into_dataclasses":
        return None
    first = ev.args[0] if ev.args else next(iter(ev.kwargs.values()), None)
    if method == "parse_dict":
        if first is not None and first.mapping is not None:
            return dict(first.mapping)
        return None
    node = ev.node
    assert isinstance(node, ast.Call)
    expr = node.args[0] if node.args else node.keywords[0].value if node.keywords else None
    path = configs.config_path(first, expr, frame, w.sources.root, w.sources.main.path)
    if path is None:
        return None
    data, problem = configs.read_config(path)
    if data is None:
        w.warnings.append(f"{w.sources.main.label}: {path.name}: {problem}; arguments unknown")
        return None
    return {k: Val(const=v) for k, v in data.items() if isinstance(k, str)}


def _from_cli(
    w: Walker, dc: Val, ev: Event, frame: Frame, values: dict[str, Val] | None = None
) -> Val:
    """A dataclass instance filled from the command line (only its defaults are known) or
    from a config the scan read (``values``: its keys, the defaults for the rest)."""

    if dc.kind == "class" and isinstance(dc.const, ClassInfo):
        obj = w.new_obj(V.INSTANCE, ev.node, frame, canon=f"local:{dc.const.name}")
        obj.extra["class"] = dc.const
        if values is None:
            # every field the run did not pass keeps its default, inherited ones (a
            # TrainingArguments subclass's gradient_accumulation_steps) included
            obj.extra["from_cli"] = True
        else:
            obj.kwargs.update(values)  # a config file: its keys, inherited fields included
        for cls in reversed(dc.const.mro()):
            for name in cls.fields:
                val = cls.attrs.get(name)
                if values is not None and name in values:
                    obj.attrs[name] = values[name]
                elif val is not None:
                    taint = val.taint if values is not None else val.taint | {V.ARGDEFAULT}
                    obj.attrs[name] = replace(val, taint=taint)
        return Val(kind=V.INSTANCE, ref=obj.ref)
    name = apis.last(dc.canon or "")
    if name in TRAINING_ARGS:
        obj = w.new_obj(V.TRAINING_ARGS, ev.node, frame, canon=dc.canon or name)
        if values is None:
            obj.extra["from_cli"] = True
        else:
            obj.kwargs.update(values)  # a config file: its keys, TrainingArguments defaults
        return Val(kind=V.TRAINING_ARGS, ref=obj.ref)
    return UNKNOWN


def _submodule(w: Walker, node: ast.Call, recv: Val, frame: Frame) -> bool:
    """The receiver is an attribute of the same model (one of its layers), not the model."""
    func = node.func
    if not isinstance(func, ast.Attribute) or not isinstance(func.value, ast.Attribute):
        return False
    owner = w.eval_pure(func.value.value, frame)
    return owner.ref is not None and owner.ref == recv.ref and owner.kind == recv.kind


def _gathered_only(taint: set[str]) -> bool:
    """All ranks' values side by side, not yet reduced to one (``gather(x).sum()`` sums them)."""
    return V.GATHERED in taint and not taint & {V.REDUCED_SUM, V.REDUCED_AVG, "reduced_other"}

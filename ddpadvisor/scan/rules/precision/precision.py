from __future__ import annotations

import ast

from ddpadvisor.scan import apis
from ddpadvisor.scan import values as V
from ddpadvisor.scan.analysis import text
from ddpadvisor.scan.context import CondCtx, Event
from ddpadvisor.scan.library.views import SCRIPT, Answer
from ddpadvisor.scan.rules.base import RuleContext, cli_switched, kw_node, may_not_run
from ddpadvisor.scan.rules.registry import not_in_excerpt, rule
from ddpadvisor.scan.source import dotted
from ddpadvisor.scan.values import Obj


@rule(
    "The training precision and whether a GradScaler scales the loss.",
    facts={
        "precision": not_in_excerpt("fp32"),
        "uses_grad_scaler": not_in_excerpt(False),
    },
)
def precision(rc: RuleContext) -> None:
    a = rc.a
    if rc.ds is not None:
        rc.warn(f"{rc.ds.where}: DeepSpeed config decides precision and loss scaling")
        return
    if _apex_amp(rc):
        return
    uses_lora = bool(rc._lora_evidence() or rc.lora_switched)  # adapters may be on
    casts: list[tuple[str, str]] = []
    switched: list[str] = []
    trained = _trained_models(rc)
    for o in trained:
        for dtype, ev in o.extra.get("casts", []):
            casts.append((dtype, ev.where))
            if cli_switched(ev):
                switched.append(ev.where)
        load = o.extra.get("load_dtype")
        if load and load[0] in ("fp16", "bf16"):
            casts.append((load[0], load[1].where))
    swapped = _param_data_swapped(rc, trained)
    if swapped is not None:
        # ``p.data = p._master`` before the step and back after it: mixed precision by hand,
        # the dtypes of each moment decided by the project's own bookkeeping
        rc.warn(
            f"{swapped.where}: the trained parameters' data is reassigned on every step; "
            "precision not decided"
        )
        _scaler(rc, None)
        return
    for dtype, ev in _param_data_casts(rc, trained):
        casts.append((dtype, ev.where))
        if cli_switched(ev):
            switched.append(ev.where)
    for e in a.calls():
        if apis.last(e.name) == "set_default_dtype" and e.args:
            dtype = apis.dtype_of(e.args[0].canon)
            if dtype is not None:
                casts.insert(0, (dtype, e.where))  # applies to every model built after it
    if casts and casts[-1][0] == "unknown":
        # ``model.to(bf16 if <the GPU supports it> else fp32)``: the run's machine decides
        rc.warn(f"{casts[-1][1]}: model cast to a dtype chosen at run time; precision not decided")
        _scaler(rc, None)
        return
    low = [(d, w) for d, w in casts if d in ("fp16", "bf16")]
    if low and casts[-1][0] in ("fp16", "bf16") and not uses_lora:
        d, where = low[-1]
        if where in switched:
            # ``if args.half: model.half()``: the run's flags decide the weights' dtype.
            rc.warn(
                f"{where}: model cast to {d} behind a command-line switch; precision not decided"
            )
            return
        rc.emit(
            "precision",
            f"pure_{d}",
            where,
            f"model weights cast to {d} ({where}); optimizer steps on them",
        )
        _scaler(rc, f"pure_{d}")
        return
    fw = rc.framework
    said = fw.precision() if fw is not None else SCRIPT
    if said is not SCRIPT:
        rc.say("precision", said)
        if isinstance(said, Answer):
            _scaler(rc, str(said.value), framework=said.where)
        return
    fwds = a.train_forwards
    if not fwds:
        return
    autocasts = [w for f in fwds for w in f.withs() if w.kind == V.CTX_AUTOCAST]
    if autocasts:
        w = autocasts[0]
        dtype, state = w.val.const if isinstance(w.val.const, tuple) else ("unknown", "maybe")
        where = f"{w.file}:{w.line}"
        if state == "off":
            value = "fp32"
        elif state == "maybe" or dtype in ("unknown", None):
            rc.warn(f"{where}: autocast dtype or enabled flag decided at run time")
            _scaler(rc, None)
            return
        else:
            value = {"fp16": "fp16_amp", "bf16": "bf16_amp", "fp32": "fp32"}[dtype]
        rc.emit(
            "precision",
            value,
            where,
            f"forward under autocast ({dtype})" if value != "fp32" else "autocast disabled",
        )
        _scaler(rc, value)
        return
    decorated = _autocast_decorator(rc)
    if decorated is not None:
        dtype, where = decorated
        if dtype in ("fp16", "bf16"):
            value = f"{dtype}_amp"
            rc.emit("precision", value, where, f"model forward decorated with autocast ({dtype})")
            _scaler(rc, value)
        else:
            rc.warn(f"{where}: forward decorated with autocast of unknown dtype")
        return
    policy = _fsdp_precision_policy(rc)
    if policy is not None:
        rc.warn(f"{policy}: FSDP's mixed-precision policy sets the compute dtype; not decided")
        _scaler(rc, None)
        return
    part = [
        ev.where
        for o in _trained_models(rc)
        for dtype, ev in o.extra.get("part_casts", [])
        if dtype in ("fp16", "bf16")
    ]
    if part:
        # ``self.transformer.wte.to(dtype=bf16)``: some layers in half precision, the rest
        # as built; the model's own forward may cast to a compute dtype without autocast
        rc.warn(f"{part[0]}: some layers cast to half precision; precision not decided")
        _scaler(rc, None)
        return
    if all(_model_unknown(f) for f in fwds):
        # ``model = load_model(...)`` from code the scan does not read: its own layers may cast
        # to a compute dtype (nanochat's Linear casts its weights in forward)
        rc.warn(
            f"{fwds[0].where}: the model comes from code the scan does not read; "
            "no autocast seen, but precision not decided"
        )
        _scaler(rc, None)
        return
    built = _trained_models(rc)
    if built and all(o.canon == "unknown-model" for o in built):
        # ``model = MODELS.__dict__[args.model](args)`` from code the scan does not read, seen
        # first at its DDP wrap: its builder may set a half default dtype or cast its layers
        # (a frozen fp16 base with fp32 adapters), which no autocast would show
        o = built[0]
        rc.warn(
            f"{o.where}: the trained model is built where the scan does not read; "
            "no autocast seen, but precision not decided"
        )
        _scaler(rc, None)
        return
    if low and casts[-1][0] in ("fp16", "bf16") and uses_lora:
        # the base weights in half precision, the adapters as the adapter library makes them
        # (often fp32), and no autocast or framework says more: not fp32, nor pure half
        rc.warn(f"{low[-1][1]}: model cast to {low[-1][0]} with adapters on; precision not decided")
        _scaler(rc, None)
        return
    rc.emit(
        "precision",
        "fp32",
        fwds[0].where,
        "no autocast and no half-precision cast around the forward",
    )
    _scaler(rc, "fp32")


# apex.amp opt levels (NVIDIA apex docs, "opt-levels and properties"): O1 patches functions to
# cast to fp16 around fp32 weights, O2 keeps fp16 weights with fp32 master copies that the
# optimizer steps on, O3 is pure fp16; O1 and O2 scale the loss dynamically by default, O0 and
# O3 with a static 1.0. https://nvidia.github.io/apex/amp.html#opt-levels
_APEX_LEVELS = {"O0": "fp32", "O1": "fp16_amp", "O2": "fp16_amp", "O3": "pure_fp16"}
_APEX_DYNAMIC = {"O1", "O2"}


def _apex_amp(rc: RuleContext) -> bool:
    """``apex.amp.initialize(model, optimizer, opt_level=...)`` sets the precision and, with
    ``amp.scale_loss``, the loss scaling. Returns whether it decided (or left open) both."""
    inits = [
        e for e in rc.a.calls() if e.name.startswith("apex.") and e.name.endswith(".initialize")
    ]
    if not inits:
        return False
    e = inits[0]
    node = e.node
    level_val = e.kwargs.get("opt_level")
    if level_val is None and isinstance(node, ast.Call) and len(e.args) > 2:
        level_val = e.args[2]
    level = level_val.const if level_val is not None and level_val.known else None
    if level_val is None:
        level = "O1"  # amp.initialize's default opt_level
    if (
        not isinstance(level, str)
        or level not in _APEX_LEVELS
        or V.ARGDEFAULT in (level_val.taint if level_val is not None else ())
    ):
        rc.warn(f"{e.where}: apex amp opt_level set at run time; precision not decided")
        return True
    if may_not_run(rc, e):
        rc.warn(
            f"{e.where}: apex amp.initialize(opt_level={level!r}) runs only under an option; "
            "precision and loss scaling not decided"
        )
        return True
    rc.emit("precision", _APEX_LEVELS[level], e.where, f"apex amp opt_level {level}")
    scale = e.kwargs.get("loss_scale")
    scaled = [
        c for c in rc.a.calls() if c.name.startswith("apex.") and c.name.endswith(".scale_loss")
    ]
    if not scaled:
        if rc.a.main_backward is not None:
            rc.emit(
                "uses_grad_scaler",
                False,
                rc.a.main_backward.where,
                "apex amp without amp.scale_loss: the backward is not scaled",
            )
        return True
    if scale is None:
        dynamic = level in _APEX_DYNAMIC
        rc.emit(
            "uses_grad_scaler",
            dynamic,
            scaled[0].where,
            f"apex amp.scale_loss with opt_level {level}'s default loss scale "
            + ("(dynamic)" if dynamic else "(a static 1.0: no scaling)"),
        )
    elif scale.known and scale.const == "dynamic":
        rc.emit("uses_grad_scaler", True, scaled[0].where, "apex amp dynamic loss scaling")
    elif scale.known and isinstance(scale.const, (int, float)) and V.ARGDEFAULT not in scale.taint:
        rc.emit(
            "uses_grad_scaler",
            float(scale.const) != 1.0,
            scaled[0].where,
            f"apex amp static loss scale {scale.const}",
        )
    else:
        rc.warn(f"{e.where}: apex amp loss_scale set at run time; loss scaling not decided")
    return True


def _param_data_assigns(rc: RuleContext, models: list[Obj]) -> list[Event]:
    """``p.data = ...`` on the parameters of a trained model (or of its wrapper)."""
    refs = {o.ref for o in models}
    refs |= {w.ref for w in rc.a.objs(V.DDP, V.FSDP) if w.wraps is not None and w.wraps in refs}
    return [
        e
        for e in rc.a.events
        if e.kind == "assign"
        and e.attr == "data"
        and e.recv is not None
        and e.recv.kind == V.PARAMS
        and e.recv.ref in refs
    ]


def _param_data_swapped(rc: RuleContext, models: list[Obj]) -> Event | None:
    """A ``p.data = ...`` that runs on every optimizer step (inside the step's loop)."""
    step = rc.a.main_step
    loops = step.loops() if step is not None else []
    if not loops:
        return None
    for e in _param_data_assigns(rc, models):
        if any(c is loops[-1] for c in e.ctx):
            return e
    return None


def _param_data_casts(rc: RuleContext, models: list[Obj]) -> list[tuple[str, Event]]:
    """``p.data = p.data.to(dtype)`` over a trained model's parameters (a helper handed
    ``model.parameters()``): the same as casting the model. (dtype, the assignment)."""
    out: list[tuple[str, Event]] = []
    for e in _param_data_assigns(rc, models):
        for c in rc.a.calls_at(e.where):
            if c.recv is None or c.recv.kind != V.PARAMS or c.seq > e.seq:
                continue
            named = {"half": "fp16", "bfloat16": "bf16", "float": "fp32"}.get(c.method or "")
            if named is None and c.method in ("to", "type"):
                found = {apis.dtype_of(a.canon) for a in [*c.args, *c.kwargs.values()]} - {None}
                named = found.pop() if len(found) == 1 else ("unknown" if found else None)
                if named is None and any(
                    a.kind not in ("symbol", "module") and not a.known for a in c.args[:1]
                ):
                    named = "unknown"  # a dtype the scan cannot name (a parameter, a config)
            if named is not None:
                out.append((named, e))
                break
    return out


def _fsdp_precision_policy(rc: RuleContext) -> str | None:
    """Where an FSDP wrap gets a mixed-precision policy (``FSDP(..., mixed_precision=p)``,
    ``fully_shard(..., mp_policy=p)``) that is not plainly None: it casts the parameters for
    the forward without any autocast in the loop (llama-cookbook's bf16 policy)."""
    for o in rc.a.fsdps:
        ev = rc.a.by_seq.get(o.seq)
        if ev is None:
            continue
        for key in ("mixed_precision", "mp_policy"):
            val = ev.kwargs.get(key)
            if val is not None and not (val.known and val.const is None):
                return ev.where
    return None


def _one_side_of_ternary(rc: RuleContext, o: Obj) -> bool:
    """The object is built in one branch of a conditional expression (``a if test else b``)
    whose test the scan cannot decide."""
    sources = rc.walk.sources
    file = o.where.rpartition(":")[0]
    module = next((m for m in [sources.main, *sources.modules.values()] if m.label == file), None)
    if module is None or o.node is None:
        return False
    for sub in ast.walk(module.tree):
        if isinstance(sub, ast.IfExp) and sub.lineno <= o.line <= (sub.end_lineno or sub.lineno):
            inside = {id(n) for part in (sub.body, sub.orelse) for n in ast.walk(part)}
            if id(o.node) in inside:
                return True
    return False


def _model_unknown(fwd: Event) -> bool:
    """A forward through a value the scan only guesses is a model (by its name), not one it
    built or read."""
    taint = fwd.result.taint if fwd.result is not None else frozenset()
    return "model:None" in taint and not any(
        t.startswith("model:") and t != "model:None" for t in taint
    )


def _trained_models(rc: RuleContext) -> list[Obj]:
    """The models whose dtype is the training precision: those wrapped for DDP (or prepared
    by a framework) or whose parameters the optimizer holds. A frozen helper cast to half
    (diffusers' ``vae.to(dtype=weight_dtype)``, a text encoder) trains nothing. When the scan
    cannot tell which model trains, every model not frozen with ``requires_grad_(False)``
    counts."""
    models = rc.a.objs(V.MODEL)
    trained = {o.ref for o in models if o.wrapped_by is not None}
    for opt in rc.a.objs(V.OPTIMIZER):
        params = opt.kwargs.get("params") or (opt.args[0] if opt.args else None)
        if params is not None and params.ref is not None:
            trained.add(params.ref)
    kept = [o for o in models if o.ref in trained]
    for o in list(kept):
        # a wrapper of the project's own (``DataParallelBucket(model)``) that holds one model:
        # the weights it trains are that model's, cast before the wrap
        inner = {
            v.ref for v in o.attrs.values() if v.kind == V.MODEL and v.ref not in (None, o.ref)
        }
        held = [rc.a.objects[r] for r in inner if r in rc.a.objects]
        if len(held) == 1 and not o.extra.get("casts") and held[0] not in kept:
            kept.append(held[0])
    if kept:
        return kept
    # which model trains is not known: a model frozen with ``requires_grad_(False)`` is not it
    # (diffusers casts its frozen text encoder and VAE to fp16; the UNet it trains stays fp32)
    frozen = {
        e.recv.ref
        for e in rc.a.calls("requires_grad_")
        if e.recv is not None
        and e.recv.ref is not None
        and e.args
        and e.args[0].known
        and e.args[0].const is False
    }
    return [o for o in models if o.ref not in frozen]


def _autocast_decorator(rc: RuleContext) -> tuple[str | None, str] | None:
    """``@torch.autocast(...)`` on the forward of a model class built in the script."""
    for o in rc.a.objs(V.MODEL):
        info = rc._class_of(o)
        found = info.find_method("forward") if info is not None else None
        if found is None:
            continue
        owner, fn = found
        for deco in fn.decorator_list:
            call = deco if isinstance(deco, ast.Call) else None
            name = dotted(call.func if call is not None else deco)
            if apis.last(name) != "autocast":
                continue
            dtype: str | None = "fp16" if "cuda" in name else "bf16" if "cpu" in name else None
            if call is not None:
                for kw in call.keywords:
                    if kw.arg == "dtype":
                        dtype = apis.dtype_of(dotted(kw.value))
                    if (
                        kw.arg == "device_type"
                        and isinstance(kw.value, ast.Constant)
                        and dtype is None
                    ):
                        dtype = {"cuda": "fp16", "cpu": "bf16"}.get(str(kw.value.value))
                if call.args and isinstance(call.args[0], ast.Constant) and dtype is None:
                    dtype = {"cuda": "fp16", "cpu": "bf16"}.get(str(call.args[0].value))
            return dtype, f"{owner.scope.module.label}:{deco.lineno}"
    return None


def _scaler(rc: RuleContext, precision: str | None, framework: str | None = None) -> None:
    if framework is not None:
        rc.emit(
            "uses_grad_scaler",
            precision == "fp16_amp",
            framework,
            "the framework uses a GradScaler for fp16 only",
        )
        return
    scalers = rc.a.objs(V.SCALER)
    if scalers:
        s = scalers[0]
        # ``GradScaler() if COMPUTE_DTYPE == torch.float16 else None``: made or not by a test
        # the scan cannot decide. (A scaler made under an ``if`` statement keeps the walk's
        # reading, its body: DINO's ``if args.use_fp16:`` also decides the autocast through
        # ``autocast(fp16_scaler is not None)``, so scaler and fp16 come together.)
        if _one_side_of_ternary(rc, s):
            rc.warn(f"{s.where}: a GradScaler is made on one side of a condition only; not decided")
            return
        made = rc.a.by_seq.get(s.seq)
        if made is not None and may_not_run(rc, made) and _default_skips(made):
            # ``if cfg.use_fp16: scaler = GradScaler()`` with the option off by default: the
            # default run makes none, but the run may turn it on
            rc.cli_default("uses_grad_scaler", False, s.where)
            return
        enabled = s.kwargs.get("enabled")
        if enabled is not None and enabled.known and V.ARGDEFAULT in enabled.taint:
            rc.cli_default("uses_grad_scaler", bool(enabled.const), s.where)
        elif enabled is None or (enabled.known and enabled.const is True):
            rc.emit("uses_grad_scaler", True, s.where, "GradScaler created")
        elif enabled.known and enabled.const is False:
            rc.emit("uses_grad_scaler", False, s.where, "GradScaler(enabled=False)")
        else:
            rc.warn(
                f"{s.where}: GradScaler enabled at run time ({text(kw_node(s.node, 'enabled'))})"
            )
        return
    if rc.framework is not None and rc.framework.scales_loss():
        return  # the framework scales fp16 losses itself when its precision asks for it
    if rc.a.main_backward is not None and rc.a.opt_steps:
        step = rc.a.main_step or rc.a.opt_steps[0]
        rc.emit(
            "uses_grad_scaler",
            False,
            step.where,
            "no GradScaler: optimizer steps on unscaled gradients",
        )


def _default_skips(e: Event) -> bool:
    """Some option-decided ``if`` around the event takes the other side with its default."""
    return any(
        c.const is not None and bool(c.const) != c.branch
        for c in e.ctx
        if isinstance(c, CondCtx) and (V.ARGDEFAULT in c.taint or "cli" in c.taint)
    )

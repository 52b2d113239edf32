"""Hooks into DeepSpeed, only when the job imported it: ``DeepSpeedEngine`` construction,
``forward``, ``backward`` and ``step``.

DeepSpeed reduces gradients through its own communication layer (on the CPU its shared-memory
op, not a ``torch.distributed`` call the agent sees), keeps its own accumulation boundary and
(for fp16) its own dynamic loss scaler, and with ZeRO partitions the optimizer state (stage >=
1), the gradients (>= 2) and the parameters (3) across ranks. The agent records, per engine,
what decides those (a ``ds`` record) and, per optimizer step, the engine's calls (the step
record's ``ds``: ``engine.step`` and ``engine.backward`` calls, the accumulation boundary the
engine reported, the loss scale, whether the step was skipped on an fp16 overflow).

Names read here, as DeepSpeed 0.19 defines them (deepspeed/runtime/engine.py:
https://github.com/deepspeedai/DeepSpeed/blob/master/deepspeed/runtime/engine.py):
``zero_optimization_stage()``, ``gradient_accumulation_steps()``, ``gradient_clipping()``,
``fp16_enabled()``, ``bfloat16_enabled()``, ``dynamic_loss_scale()``,
``dynamic_loss_scale_args()`` (its ``min_loss_scale``), ``is_gradient_accumulation_boundary()``,
``micro_steps``, ``skipped_steps``, and the optimizer's ``overflow`` and ``cur_scale``
(``_take_model_step`` counts a skipped step when ``optimizer.overflow`` is set; ZeRO's
``loss_scale`` property reads ``loss_scaler.cur_scale``: runtime/zero/stage_1_and_2.py). Each is
read with ``getattr`` and a default, so another version loses a value, never the job.

``deepspeed`` is never imported here: the engine class is wrapped when the job's own import of
it is seen (at install, when the process group starts, at the first backward).
"""

from __future__ import annotations

import sys
import weakref
from typing import Any

import torch

from .. import runtime as rt
from ..runtime import _busy, _compiling, _wrap

ENGINE_MODULE = "deepspeed.runtime.engine"


def install() -> None:
    rt.ON_ACTIVATE.append(("deepspeed", _ensure))
    rt.LATE.append(("deepspeed", _ensure))
    _ensure()


def _ensure() -> None:
    """Wrap ``DeepSpeedEngine`` once its module is loaded (does nothing before that)."""
    mod = sys.modules.get(ENGINE_MODULE)
    cls = getattr(mod, "DeepSpeedEngine", None)
    if cls is None or getattr(cls.__init__, "__ddpadvisor__", False):
        return
    rt.CURRENT[0], previous = "deepspeed", rt.CURRENT[0]
    try:
        _wrap(cls, "__init__", "ds_init", _make_init)
        _wrap(cls, "forward", "ds_forward", _make_forward)
        _wrap(cls, "backward", "ds_backward", _make_backward)
        _wrap(cls, "step", "ds_step", _make_step)
    finally:
        rt.CURRENT[0] = previous


def _make_init(orig: Any) -> Any:
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        orig(self, *args, **kwargs)
        a = rt.AGENT
        if a is not None:
            a.safe("deepspeed", register, a, self)

    return __init__


def _make_forward(orig: Any) -> Any:
    def forward(self: Any, *args: Any, **kwargs: Any) -> Any:
        a = rt.AGENT
        if a is not None and not _busy() and not _compiling():
            a.safe("deepspeed", register, a, self)
            if torch.is_grad_enabled():
                a.counters["fwd"] += 1
                a.safe("forward", a.digest_inputs, args, kwargs)
        return orig(self, *args, **kwargs)

    return forward


def _make_backward(orig: Any) -> Any:
    def backward(self: Any, loss: Any, *args: Any, **kwargs: Any) -> Any:
        a = rt.AGENT
        if a is None or _busy() or _compiling():
            return orig(self, loss, *args, **kwargs)
        a.safe("deepspeed", register, a, self)
        state = a.safe("deepspeed", _before_backward, a, self)
        out = orig(self, loss, *args, **kwargs)
        if state is not None:
            a.safe("deepspeed", _after_backward, a, self, loss, state)
        return out

    return backward


def _make_step(orig: Any) -> Any:
    def step(self: Any, *args: Any, **kwargs: Any) -> Any:
        a = rt.AGENT
        if a is None or _busy() or _compiling():
            return orig(self, *args, **kwargs)
        a.safe("deepspeed", register, a, self)
        boundary = a.safe("deepspeed", _before_step, a, self)
        if a.ds_in_step == 0:
            a.ds_step_counted = False
        a.ds_in_step += 1
        try:
            out = orig(self, *args, **kwargs)
        finally:
            a.ds_in_step -= 1
        if boundary:
            a.safe("deepspeed", _after_boundary_step, a, self)
        if a.ds_in_step == 0 and a.ds_check is not None:
            opt, a.ds_check = a.ds_check, None
            a.safe("check", a.check, opt, False)
        return out

    return step


# -- the engine ----------------------------------------------------------------------------


def _call(engine: Any, name: str, default: Any = None) -> Any:
    fn = getattr(engine, name, None)
    if not callable(fn):
        return default
    try:
        return fn()
    except Exception:
        return default


def register(a: Any, engine: Any) -> None:
    """Record the engine once: ZeRO stage, accumulation, clipping, precision, loss scaler."""
    if id(engine) in a.ds_info:
        return
    a.activate()
    stage = _call(engine, "zero_optimization_stage", 0)
    module = getattr(engine, "module", None)
    info = {
        "index": len(a.ds_info),
        "engine": weakref.ref(engine),
        "module": weakref.ref(module) if module is not None else None,
        "stage": int(stage or 0),
    }
    a.ds_info[id(engine)] = info
    if module is not None:
        for m in module.modules():
            a.wrapped_modules.add(m)
    opt = getattr(engine, "optimizer", None)
    basic = getattr(opt, "optimizer", None) if opt is not None else None
    a.ds_opts.update(id(o) for o in (opt, basic) if o is not None)
    fp16 = bool(_call(engine, "fp16_enabled", False))
    dyn_args = _call(engine, "dynamic_loss_scale_args") if fp16 else None
    min_scale = None
    if isinstance(dyn_args, dict):
        min_scale = next((v for k, v in dyn_args.items() if "min" in str(k).lower()), None)
    n_params = sum(1 for _ in module.parameters()) if module is not None else 0
    a.record(
        {
            "k": "ds",
            "engine": info["index"],
            "step": a.step,
            "stage": info["stage"],
            "gas": _plain_int(_call(engine, "gradient_accumulation_steps", 1)),
            "micro": _plain_int(_call(engine, "train_micro_batch_size_per_gpu")),
            "clip": _plain_float(_call(engine, "gradient_clipping", 0.0)),
            "fp16": fp16,
            "bf16": bool(_call(engine, "bfloat16_enabled", False)),
            "dynamic": bool(_call(engine, "dynamic_loss_scale", False)) if fp16 else False,
            "min_scale": _plain_float(min_scale),
            "scale": _plain_float(_loss_scale(engine)),
            "managed": bool(_call(engine, "managed_gradient_accumulation", True)),
            "opt": type(opt).__name__ if opt is not None else None,
            "basic": type(basic).__name__ if basic is not None else None,
            "n_params": n_params,
            "dtypes": sorted(
                {str(p.dtype).replace("torch.", "") for p in module.parameters()}
                if module is not None
                else set()
            ),
            "version": str(getattr(sys.modules.get("deepspeed"), "__version__", "")),
        }
    )


def _plain_int(x: Any) -> int | None:
    try:
        return int(x) if x is not None else None
    except (TypeError, ValueError):
        return None


def _plain_float(x: Any) -> float | None:
    try:
        return float(x) if x is not None else None
    except (TypeError, ValueError):
        return None


def _loss_scale(engine: Any) -> Any:
    """The fp16 loss scale the engine's optimizer applies now (1.0 without fp16)."""
    opt = getattr(engine, "optimizer", None)
    config = getattr(opt, "loss_scale_config", None)
    if config is not None and hasattr(config, "cur_scale"):
        return config.cur_scale
    if hasattr(opt, "cur_scale"):
        return getattr(opt, "cur_scale", None)
    scaler = getattr(opt, "loss_scaler", None)
    return getattr(scaler, "cur_scale", None)


def _window(a: Any) -> dict[str, Any]:
    w = a.window
    if w.ds is None:
        w.ds = {"steps": 0, "bwd": 0, "bnd": []}
    return w.ds  # type: ignore[no-any-return]


def _before_backward(a: Any, engine: Any) -> dict[str, Any]:
    return {
        "n": len(a.window.backwards),
        "boundary": bool(engine.is_gradient_accumulation_boundary()),
        "scale": _plain_float(_loss_scale(engine)) if _call(engine, "fp16_enabled") else None,
    }


def _after_backward(a: Any, engine: Any, loss: Any, state: dict[str, Any]) -> None:
    """The engine divided the loss by its accumulation steps (``scale_wrt_gas``) and, in fp16,
    multiplied it by the loss scale, inside ``backward``: the loss recorded is the user's, and
    the loss scale is taken out of the factor (it is undone before the optimizer steps)."""
    ds = _window(a)
    ds["bwd"] += 1
    ds["bnd"].append(state["boundary"])
    bws = a.window.backwards
    if len(bws) <= state["n"]:
        return
    b = bws[-1]
    if isinstance(loss, torch.Tensor) and loss.numel() == 1:
        b.loss = loss.detach().reshape(()).to(torch.float32).clone()
    scale = state["scale"]
    if scale and b.factor is not None:
        b.factor = b.factor / scale


def _before_step(a: Any, engine: Any) -> bool:
    ds = _window(a)
    ds["steps"] += 1
    boundary = bool(engine.is_gradient_accumulation_boundary())
    if boundary:
        scale = _loss_scale(engine) if _call(engine, "fp16_enabled") else None
        if scale is not None:
            ds["scale"] = _plain_float(scale)
    return boundary


def _after_boundary_step(a: Any, engine: Any) -> None:
    """An fp16 overflow: DeepSpeed skipped the optimizer step (no torch optimizer stepped), so
    the agent closes the step itself, as it does for a GradScaler's skipped step."""
    opt = getattr(engine, "optimizer", None)
    if not bool(getattr(opt, "overflow", False)):
        return
    inner = getattr(opt, "optimizer", None)
    target = inner if isinstance(inner, torch.optim.Optimizer) else opt
    if not isinstance(target, torch.optim.Optimizer):
        return
    ds = _window(a)
    ds["overflow"] = True
    if a.is_primary(target):
        a.end_step(target, skipped=True)


def uninstall() -> None:
    """Take this patch's wrappers back out."""
    rt.LATE[:] = [(name, fn) for name, fn in rt.LATE if name != "deepspeed"]
    rt.ON_ACTIVATE[:] = [(name, fn) for name, fn in rt.ON_ACTIVATE if name != "deepspeed"]
    rt.undo("deepspeed")

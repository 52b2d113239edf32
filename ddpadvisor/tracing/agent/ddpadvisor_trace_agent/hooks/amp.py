"""Hooks into torch: GradScaler, autocast and torch.compile."""

from __future__ import annotations

import sys
from typing import Any

import torch

from .. import runtime as rt
from ..core import _clone, _found_inf, _record_load
from ..runtime import _busy, _wrap


def install() -> None:
    try:
        from torch.amp import grad_scaler
    except Exception:
        return
    GradScaler = grad_scaler.GradScaler

    def make_scale(orig: Any) -> Any:
        def scale(self: Any, outputs: Any) -> Any:
            out = orig(self, outputs)
            a = rt.AGENT
            if a is not None and getattr(self, "_enabled", False) and not _busy():
                a.scalers.add(self)
                a.window.scaled = True
                if isinstance(out, torch.Tensor) and isinstance(outputs, torch.Tensor):
                    a.scaled_map[out] = outputs
                a.cfg("scaler", {"k": "cfg", "scaler": True, "device": self._device})
            return out

        return scale

    def make_step(orig: Any) -> Any:
        def step(self: Any, optimizer: Any, *args: Any, **kwargs: Any) -> Any:
            a = rt.AGENT
            before = a.opt_steps.get(id(optimizer), 0) if a is not None else 0
            out = orig(self, optimizer, *args, **kwargs)
            skipped = a is not None and a.opt_steps.get(id(optimizer), 0) == before
            enabled = getattr(self, "_enabled", False) and not _busy()
            if skipped and enabled and a.is_primary(optimizer):
                a.safe("step", a.end_step, optimizer, True)
            return out

        return step

    def make_update(orig: Any) -> Any:
        def update(self: Any, *args: Any, **kwargs: Any) -> Any:
            a = rt.AGENT
            if a is not None and getattr(self, "_enabled", False) and not _busy():
                found = a.safe("scaler", _found_inf, self)
                out = orig(self, *args, **kwargs)
                rec = a.pending_step
                if rec is not None and found is not None:
                    rec["finf"] = found
                a.pending_step = None
                if rec is not None:
                    rec["scale"] = _clone(getattr(self, "_scale", None))
                    rec["growth"] = _clone(getattr(self, "_growth_tracker", None))
                    a.safe("scaler", a.record, rec)
                return out
            return orig(self, *args, **kwargs)

        return update

    def make_load(orig: Any) -> Any:
        def load_state_dict(self: Any, *args: Any, **kwargs: Any) -> Any:
            a = rt.AGENT
            if a is not None and not _busy():
                a.safe("load", _record_load, a, self, "scaler")
            return orig(self, *args, **kwargs)

        return load_state_dict

    _wrap(GradScaler, "scale", "scaler_scale", make_scale)
    _wrap(GradScaler, "step", "scaler_step", make_step)
    _wrap(GradScaler, "update", "scaler_update", make_update)
    _wrap(GradScaler, "load_state_dict", "scaler_load", make_load)

    def make_enter(orig: Any) -> Any:
        def __enter__(self: Any) -> Any:
            out = orig(self)
            a = rt.AGENT
            if a is not None and getattr(self, "_enabled", False) and not _busy():
                dtype = str(getattr(self, "fast_dtype", "")).replace("torch.", "")
                key = f"autocast:{self.device}:{dtype}"
                a.safe("amp", a.cfg, key, {"k": "cfg", "autocast": dtype, "device": self.device})
            return out

        return __enter__

    from torch.amp import autocast_mode

    _wrap(autocast_mode.autocast, "__enter__", "autocast_enter", make_enter)

    def make_compile(orig: Any) -> Any:
        def compile(*args: Any, **kwargs: Any) -> Any:
            a = rt.AGENT
            if a is not None and _compiles_the_job(args, kwargs, sys._getframe(1)):
                a.safe("compile", a.cfg, "compile", {"k": "cfg", "compile": True})
            return orig(*args, **kwargs)

        return compile

    _wrap(torch, "compile", "compile", make_compile)


# Libraries that compile helper functions of their own when imported (DeepSpeed's
# jit_script_compat: deepspeed/utils/torch.py): such a call compiles none of the job's model.
_LIBRARY_CALLERS = ("deepspeed", "torch")


def _compiles_the_job(args: tuple[Any, ...], kwargs: dict[str, Any], caller: Any) -> bool:
    """A torch.compile call that compiles the job: any module, or a function the job's own code
    (not a library's import-time helper) compiles."""
    target = args[0] if args else kwargs.get("model")
    if isinstance(target, torch.nn.Module):
        return True
    package = str(caller.f_globals.get("__name__", "")).split(".")[0]
    return package not in _LIBRARY_CALLERS


def uninstall() -> None:
    """Take this patch's wrappers and hooks back out."""
    rt.undo("amp")

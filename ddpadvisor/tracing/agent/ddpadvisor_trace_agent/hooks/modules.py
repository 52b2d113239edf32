"""Hooks into torch: module/parameter registration after wrapping."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .. import runtime as rt
from ..runtime import _busy


def _registration_hook(kind: str) -> Callable[..., None]:
    def hook(module: Any, name: str, value: Any) -> None:
        a = rt.AGENT
        if a is None or not a.ddps or value is None or _busy():
            return None
        if module not in a.wrapped_modules:
            return None
        if kind == "module":
            n = sum(1 for _ in value.parameters())
            if n == 0:
                return None
        a.safe(
            "register",
            a.record,
            {"k": "reg", "kind": kind, "name": name, "cls": type(value).__name__, "s": a.step},
        )
        if kind == "module":
            for m in value.modules():
                a.wrapped_modules.add(m)
        return None

    return hook


def install() -> None:
    from torch.nn.modules import module as module_mod

    handle = module_mod.register_module_module_registration_hook(_registration_hook("module"))
    rt.on_undo(handle.remove)
    handle = module_mod.register_module_parameter_registration_hook(_registration_hook("param"))
    rt.on_undo(handle.remove)


def uninstall() -> None:
    """Take this patch's wrappers and hooks back out."""
    rt.undo("modules")

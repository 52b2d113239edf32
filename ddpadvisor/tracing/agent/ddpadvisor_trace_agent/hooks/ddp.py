"""Hooks into torch: DistributedDataParallel: construction, comm hooks (observed, then delegated)."""

from __future__ import annotations

from typing import Any

from .. import runtime as rt
from ..core import _observing_hook
from ..runtime import _ORIG, _wrap


def install() -> None:
    from torch.nn.parallel import DistributedDataParallel as DDP

    def make_init(orig: Any) -> Any:
        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            orig(self, *args, **kwargs)
            a = rt.AGENT
            if a is not None:
                a.safe("wrap", a.on_wrap, self)

        return __init__

    def make_register(orig: Any) -> Any:
        def register_comm_hook(self: Any, state: Any, hook: Any) -> Any:
            a = rt.AGENT
            if a is not None and "comm" not in a.disabled:
                info = a.ddp_info.get(id(self))
                if info is not None:
                    info["hooked"] = True
                name = getattr(hook, "__qualname__", type(hook).__name__)
                a.safe("comm", a.cfg, "comm_hook", {"k": "cfg", "comm_hook": name})
                hook = _observing_hook(hook)
            return orig(self, state, hook)

        return register_comm_hook

    def make_builtin(orig: Any) -> Any:
        def _register_builtin_comm_hook(self: Any, *args: Any, **kwargs: Any) -> Any:
            a = rt.AGENT
            if a is not None and id(self) in a.ddp_info:
                a.ddp_info[id(self)]["builtin_hook"] = True
                a.record({"k": "cfg", "builtin_comm_hook": True})
            return orig(self, *args, **kwargs)

        return _register_builtin_comm_hook

    _ORIG["ddp_register_comm_hook"] = DDP.register_comm_hook
    _wrap(DDP, "__init__", "ddp_init", make_init)
    _wrap(DDP, "register_comm_hook", "ddp_register_comm_hook_user", make_register)
    _wrap(DDP, "_register_builtin_comm_hook", "ddp_builtin", make_builtin)


def uninstall() -> None:
    """Take this patch's wrappers and hooks back out."""
    rt.undo("ddp")

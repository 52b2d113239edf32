"""The agent's patches, one module per torch subsystem, in installation order.

Each module has ``install()``; ``uninstall()`` takes out what its install put in (the wrappers
made with ``runtime._wrap`` and the handles registered with ``runtime.on_undo``). A patch is
switched off with ``DDPADVISOR_TRACE_OFF=<name>[,<name>…]``.
"""

from __future__ import annotations

from types import ModuleType

from . import (
    amp,
    autograd,
    clip,
    data,
    ddp,
    deepspeed,
    distributed,
    excepthook,
    losses,
    modules,
    optim,
    output,
    workers,
)

PATCHES: dict[str, ModuleType] = {
    "autograd": autograd,
    "distributed": distributed,
    "ddp": ddp,
    "optim": optim,
    "clip": clip,
    "amp": amp,
    "data": data,
    "workers": workers,
    "modules": modules,
    "losses": losses,
    "output": output,
    "deepspeed": deepspeed,
    "excepthook": excepthook,
}

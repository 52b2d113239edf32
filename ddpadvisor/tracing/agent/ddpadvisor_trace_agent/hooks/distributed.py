"""Hooks into torch: init/destroy_process_group (activation, the final check) and the user's collectives (small ones: metric reductions; large ones: counted)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from .. import runtime as rt
from ..runtime import SMALL_COLLECTIVE, _busy, _wrap


def install() -> None:
    import torch.distributed as dist
    import torch.distributed.distributed_c10d as c10d

    def make_init(orig: Any) -> Any:
        def init_process_group(*args: Any, **kwargs: Any) -> Any:
            out = orig(*args, **kwargs)
            a = rt.AGENT
            if a is not None:
                a.safe("activate", a.activate)
            return out

        return init_process_group

    def make_destroy(orig: Any) -> Any:
        def destroy_process_group(*args: Any, **kwargs: Any) -> Any:
            a = rt.AGENT
            if a is not None and a.active and not (args or kwargs.get("group")):
                a.safe("final", a.final_check, "destroy")
                a.safe("end", a.record, {"k": "destroy", "s": a.step})
                a.safe("end", a.writer.flush)
            return orig(*args, **kwargs)

        return destroy_process_group

    for owner in (dist, c10d):
        _wrap(owner, "init_process_group", f"init_process_group.{owner.__name__}", make_init)
        _wrap(owner, "destroy_process_group", f"destroy.{owner.__name__}", make_destroy)

    def make_collective(kind: str) -> Callable[[Any], Any]:
        def make(orig: Any) -> Any:
            def collective(*args: Any, **kwargs: Any) -> Any:
                a = rt.AGENT
                if a is not None and not _busy():
                    t = args[0] if args else None
                    if kind.startswith("all_gather") and len(args) > 1:
                        t = args[1]
                    if isinstance(t, torch.Tensor) and t.numel() <= SMALL_COLLECTIVE:
                        a.window.reductions += 1
                    elif isinstance(t, torch.Tensor):
                        # anything that could carry gradients or weights between ranks: with
                        # no DDP wrapper, none at all means nothing synchronises the replicas
                        a.window.big_collectives += 1
                        # gradients all-reduced by hand run between a backward and the
                        # step; one before any backward of the window (weights or BatchNorm
                        # statistics pooled at an epoch's end) reduces no gradient
                        if kind == "all_reduce" and a.ddps and a.window.backwards:
                            a.window.big_reductions += 1
                return orig(*args, **kwargs)

            return collective

        return make

    for kind in (
        "all_reduce",
        "reduce",
        "all_gather",
        "all_gather_into_tensor",
        "reduce_scatter",
        "reduce_scatter_tensor",
        "broadcast",
    ):
        for owner in (dist, c10d):
            _wrap(owner, kind, f"{kind}.{owner.__name__}", make_collective(kind))


def uninstall() -> None:
    """Take this patch's wrappers and hooks back out."""
    rt.undo("distributed")

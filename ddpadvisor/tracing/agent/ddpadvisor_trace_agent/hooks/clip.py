"""Hooks into torch: clip_grad_norm_ (and clip_grads_with_norm_): the norm and where it ran."""

from __future__ import annotations

import sys
from typing import Any

import torch

from .. import runtime as rt
from ..core import Agent, _local
from ..runtime import _busy, _compiling, _wrap


def install() -> None:
    import torch.nn.utils as nn_utils
    import torch.nn.utils.clip_grad as clip_mod

    depth = [0]  # a clip that calls another (a wrapper's method, torch's function) counts once

    def make(orig: Any) -> Any:
        def clip_grad_norm_(*args: Any, **kwargs: Any) -> Any:
            depth[0] += 1
            try:
                norm = orig(*args, **kwargs)
            finally:
                depth[0] -= 1
            a = rt.AGENT
            if a is not None and depth[0] == 0 and not _busy() and not _compiling():
                a.safe("clip", _record_clip, a, norm)
            return norm

        return clip_grad_norm_

    for owner in (nn_utils, clip_mod):
        _wrap(owner, "clip_grad_norm_", f"clip.{owner.__name__}", make)

    def make_with_norm(orig: Any) -> Any:
        # The two-part API (get_total_norm, then clip_grads_with_norm_) that accelerate's
        # clip_grad_norm_ and sharded trainers call. Only the public name is wrapped: torch's
        # own clip_grad_norm_ calls the private one, so a clip is never recorded twice.
        def clip_grads_with_norm_(*args: Any, **kwargs: Any) -> Any:
            out = orig(*args, **kwargs)
            a = rt.AGENT
            if a is not None and depth[0] == 0 and not _busy() and not _compiling():
                norm = args[2] if len(args) > 2 else kwargs.get("total_norm")
                a.safe("clip", _record_clip, a, norm)
            return out

        return clip_grads_with_norm_

    if hasattr(nn_utils, "clip_grads_with_norm_"):
        _wrap(nn_utils, "clip_grads_with_norm_", "clip.with_norm", make_with_norm)

    def fsdp_method() -> None:
        # FSDP1 clips through its own method (it all-reduces the shards' norms itself).
        fsdp = sys.modules.get("torch.distributed.fsdp.fully_sharded_data_parallel")
        cls = getattr(fsdp, "FullyShardedDataParallel", None)
        if cls is not None:
            _wrap(cls, "clip_grad_norm_", "clip.fsdp", make)

    rt.LATE.append(("clip", fsdp_method))


def _record_clip(a: Agent, norm: Any) -> None:
    w = a.window
    last = w.backwards[-1] if w.backwards else None
    before_unscale = False
    opt = a.primary() if a.primary is not None else None
    if w.scaled:
        for scaler in a.scalers:
            if not getattr(scaler, "_enabled", False):
                continue
            states = getattr(scaler, "_per_optimizer_states", {})
            if opt is not None and id(opt) in states:
                stages = [states[id(opt)].get("stage")]
            else:  # before the first optimizer step the agent does not know the optimizer yet
                stages = [st.get("stage") for st in list(states.values())]
            if not any(getattr(st, "name", str(st)) == "UNSCALED" for st in stages):
                before_unscale = True
    w.clips.append(
        {
            "norm": _norm_value(norm),
            "unsynced": bool(a.ddps) and last is not None and last.buckets == 0,
            "before_unscale": before_unscale,
            "n_bwd": len(w.backwards),
        }
    )
    a.cfg("clip", {"k": "cfg", "clip": True})


def _norm_value(norm: Any) -> Any:
    """The total norm clip_grad_norm_ returned; None when it is a DTensor that is not
    replicated (a partial norm per rank), which only a collective could complete."""
    if not isinstance(norm, torch.Tensor):
        return norm
    placements = getattr(norm, "placements", None)
    if placements is not None and not all(
        getattr(p, "is_replicate", lambda: False)() for p in placements
    ):
        return None
    return _local(norm).detach().clone()


def uninstall() -> None:
    """Take this patch's wrappers and hooks back out."""
    rt.LATE[:] = [(name, fn) for name, fn in rt.LATE if name != "clip"]
    rt.undo("clip")

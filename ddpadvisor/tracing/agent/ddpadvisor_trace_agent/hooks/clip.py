"""Hooks into torch: clip_grad_norm_ (and clip_grads_with_norm_): the norm and where it ran."""

from __future__ import annotations

from typing import Any

import torch

from .. import runtime as rt
from ..core import Agent
from ..runtime import _busy, _compiling, _wrap


def install() -> None:
    import torch.nn.utils as nn_utils
    import torch.nn.utils.clip_grad as clip_mod

    def make(orig: Any) -> Any:
        def clip_grad_norm_(*args: Any, **kwargs: Any) -> Any:
            norm = orig(*args, **kwargs)
            a = rt.AGENT
            if a is not None and not _busy() and not _compiling():
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
            if a is not None and not _busy() and not _compiling():
                norm = args[2] if len(args) > 2 else kwargs.get("total_norm")
                a.safe("clip", _record_clip, a, norm)
            return out

        return clip_grads_with_norm_

    if hasattr(nn_utils, "clip_grads_with_norm_"):
        _wrap(nn_utils, "clip_grads_with_norm_", "clip.with_norm", make_with_norm)


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
            "norm": norm.detach().clone() if isinstance(norm, torch.Tensor) else norm,
            "unsynced": bool(a.ddps) and last is not None and last.buckets == 0,
            "before_unscale": before_unscale,
            "n_bwd": len(w.backwards),
        }
    )
    a.cfg("clip", {"k": "cfg", "clip": True})


def uninstall() -> None:
    """Take this patch's wrappers and hooks back out."""
    rt.undo("clip")

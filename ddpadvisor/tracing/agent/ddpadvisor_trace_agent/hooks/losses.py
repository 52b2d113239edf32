"""Hooks into torch: the classification losses (``cross_entropy``, ``nll_loss``) a training
forward computes, for what each one averages over.

A token loss with ``reduction="mean"`` divides by the number of targets that are not
``ignore_index`` in this rank's micro-batch
(https://pytorch.org/docs/stable/generated/torch.nn.CrossEntropyLoss.html); DDP then averages
those per-rank means with equal weight. The agent records, per call made while gradients are
on, the count of targets the loss kept (a tensor, read when the step is written), the count of
targets it was given and the reduction: the step record's ``ce``. ``nn.CrossEntropyLoss`` and
the HF models' loss functions call ``torch.nn.functional.cross_entropy`` by attribute, so the
one wrapper sees them too.
"""

from __future__ import annotations

from typing import Any

import torch

from .. import runtime as rt
from ..core import Agent
from ..runtime import _busy, _compiling, _wrap

REDUCTIONS = {"mean": "m", "sum": "s", "none": "n"}
LEGACY = (("size_average", 3), ("reduce", 5))
MAX_CALLS = 8  # per optimizer step: a loop that calls the loss per token position stays small


def install() -> None:
    import torch.nn.functional as F

    def make(orig: Any) -> Any:
        def loss(*args: Any, **kwargs: Any) -> Any:
            out = orig(*args, **kwargs)
            a = rt.AGENT
            if a is not None and torch.is_grad_enabled() and not _busy() and not _compiling():
                a.safe("losses", _record, a, args, kwargs)
            return out

        return loss

    for name in ("cross_entropy", "nll_loss"):
        _wrap(F, name, f"losses.{name}", make)


def _record(a: Agent, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    w = a.window
    if len(w.ce) >= MAX_CALLS:
        return
    logits = args[0] if args else kwargs.get("input")
    target = args[1] if len(args) > 1 else kwargs.get("target")
    if not isinstance(logits, torch.Tensor) or not logits.requires_grad:
        return
    if not isinstance(target, torch.Tensor) or target.is_floating_point() or target.dim() == 0:
        return  # class probabilities (soft targets): no target is ignored
    # (input, target, weight, size_average, ignore_index, reduce, reduction): both functions
    weight = kwargs.get("weight", args[2] if len(args) > 2 else None)
    legacy = [kwargs.get(k, args[i] if len(args) > i else None) for k, i in LEGACY]
    if any(x is not None for x in legacy):
        return  # legacy flags: not read
    ignore = kwargs.get("ignore_index", args[4] if len(args) > 4 else -100)
    reduction = kwargs.get("reduction", args[6] if len(args) > 6 else "mean")
    if not isinstance(ignore, int) or reduction not in REDUCTIONS:
        return
    if weight is not None and reduction == "mean":
        return  # a weighted mean divides by the weights' sum, not by a count of targets
    kept = (target.detach() != ignore).sum()
    w.ce.append([kept, int(target.numel()), REDUCTIONS[reduction]])


def uninstall() -> None:
    """Take this patch's wrappers back out."""
    rt.undo("losses")

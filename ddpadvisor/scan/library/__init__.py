"""What calls into PyTorch / HF libraries return, as abstract values.

``symbol_call`` handles calls of imported names (``torch.optim.AdamW(...)``) through the
table in :mod:`.table`, filled by :mod:`.symbols`; ``method_call`` (:mod:`.methods`) handles
methods on objects the script built (``optimizer.step()``, ``accelerator.prepare(...)``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ddpadvisor.scan import apis
from ddpadvisor.scan.context import Ctx, Event
from ddpadvisor.scan.interp.frames import Frame
from ddpadvisor.scan.library import symbols as _symbols  # noqa: F401  (fills the table)
from ddpadvisor.scan.library.methods import method_call
from ddpadvisor.scan.library.table import Call, dispatch
from ddpadvisor.scan.values import Val, merge

if TYPE_CHECKING:
    from ddpadvisor.scan.interp.core import WalkerCore

__all__ = ["method_call", "symbol_call"]


def symbol_call(w: WalkerCore, ev: Event, canon: str, frame: Frame, ctx: Ctx) -> Val:
    """The value of calling the library symbol ``canon``; unknown symbols pass their
    arguments' taint through."""
    out = dispatch(Call(w, ev, canon, apis.last(canon), frame, ctx))
    if out is not None:
        return out
    # Where a tensor is placed says nothing about its values: ``torch.randint(..., device=d)``
    # with a per-rank ``d`` is not per-rank data.
    return merge(*ev.args, *(v for k, v in ev.kwargs.items() if k != "device"))

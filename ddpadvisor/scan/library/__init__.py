"""What calls into PyTorch / HF libraries return, as abstract values.

``symbol_call`` handles calls of imported names (``torch.optim.AdamW(...)``) through the
table in :mod:`.table`, filled by :mod:`.symbols`; ``method_call`` (:mod:`.methods`) handles
methods on objects the script built (``optimizer.step()``, ``accelerator.prepare(...)``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ddpadvisor.scan import apis
from ddpadvisor.scan import values as V
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
    out = merge(*ev.args, *(v for k, v in ev.kwargs.items() if k != "device"))
    if V.FWD in out.taint and not _local_math(canon):
        # code the scan does not read got a forward pass's value: it may have reduced it
        # across ranks (``reduce_mean(loss)`` from an unread helper)
        out = out.with_taint(V.UNREAD_PATH)
    return out


# Libraries whose functions the scan does not model but which never talk to other ranks
# unless through torch.distributed (whose collectives have entries of their own).
_LOCAL_ROOTS = frozenset({"torch", "math", "numpy", "np", "statistics", "time", "builtins"})


def _local_math(canon: str) -> bool:
    root, _, rest = canon.partition(".")
    if not rest:
        return True  # a builtin: float(), round(), sum()
    return root in _LOCAL_ROOTS and not canon.startswith("torch.distributed")

"""The table that maps a called library name to what the call returns, as an abstract value.

An entry names the calls it handles by canonical name (``torch.nn.parallel.
DistributedDataParallel``, ``os.getenv``), by last name (``DataLoader``, for whatever alias
the script imported it under) or by a predicate on both (optimizer and scheduler families).
``lookup`` returns the entries that match, in table order; the first whose handler returns a
value decides (a handler returns None for a call it does not understand, e.g. ``next()``
without an argument). Entries are registered with :func:`symbol`, in the order below.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ddpadvisor.scan.context import Ctx, Event
from ddpadvisor.scan.interp.frames import Frame
from ddpadvisor.scan.values import UNKNOWN, Val

if TYPE_CHECKING:
    from ddpadvisor.scan.interp.core import WalkerCore


@dataclass(frozen=True)
class Call:
    """One call of a library symbol, as the handlers see it."""

    w: WalkerCore
    ev: Event
    canon: str  # the canonical dotted name (``torch.optim.AdamW``)
    name: str  # its last segment (``AdamW``)
    frame: Frame
    ctx: Ctx

    @property
    def args(self) -> list[Val]:
        return self.ev.args

    @property
    def a0(self) -> Val | None:
        return self.ev.args[0] if self.ev.args else None

    @property
    def node(self) -> ast.Call:
        assert isinstance(self.ev.node, ast.Call)
        return self.ev.node


Handler = Callable[[Call], Val | None]
Predicate = Callable[[str, str], bool]


@dataclass(frozen=True)
class Entry:
    handler: Handler
    order: int
    canon: frozenset[str]
    names: frozenset[str]
    when: Predicate | None

    @property
    def label(self) -> str:
        return self.handler.__name__


BY_CANON: dict[str, list[Entry]] = {}
BY_NAME: dict[str, list[Entry]] = {}
BY_PREDICATE: list[Entry] = []
ENTRIES: list[Entry] = []


def symbol(
    *canon: str, names: Iterable[str] = (), when: Predicate | None = None
) -> Callable[[Handler], Handler]:
    """Register a handler for calls of these canonical names, last names or predicate."""

    def register(handler: Handler) -> Handler:
        entry = Entry(handler, len(ENTRIES), frozenset(canon), frozenset(names), when)
        ENTRIES.append(entry)
        for c in entry.canon:
            BY_CANON.setdefault(c, []).append(entry)
        for n in entry.names:
            BY_NAME.setdefault(n, []).append(entry)
        if when is not None:
            BY_PREDICATE.append(entry)
        return handler

    return register


def lookup(canon: str, name: str) -> list[Entry]:
    """Every entry that handles this call, in table order."""
    found = {e.order: e for e in BY_CANON.get(canon, ())}
    found.update((e.order, e) for e in BY_NAME.get(name, ()))
    found.update((e.order, e) for e in BY_PREDICATE if e.when is not None and e.when(canon, name))
    return [found[k] for k in sorted(found)]


def dispatch(call: Call) -> Val | None:
    for entry in lookup(call.canon, call.name):
        out = entry.handler(call)
        if out is not None:
            return out
    return None


__all__ = ["UNKNOWN", "Call", "Entry", "dispatch", "lookup", "symbol"]

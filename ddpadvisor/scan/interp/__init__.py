"""Walk a training script in program order without running it.

The walker is a small abstract interpreter over the ``ast``: it visits statements in the
order Python would run them (each loop body once), inlines calls to functions and methods
defined in the scanned files, and records every call and attribute assignment as an
:class:`Event` together with its context (enclosing loops, ``with`` blocks, ``if`` branches).
Values are :class:`Val` abstractions: object kinds, identities, constants and taint.
The rules in :mod:`ddpadvisor.scan.rules` read the events; the walker decides nothing.
"""

from __future__ import annotations

from ddpadvisor.scan.interp.expressions import Expressions
from ddpadvisor.scan.interp.frames import (
    ClassInfo,
    Frame,
    FuncRef,
    ModuleScope,
    WalkResult,
    is_cli_default,
    union,
)
from ddpadvisor.scan.interp.statements import Statements

__all__ = [
    "ClassInfo",
    "Frame",
    "FuncRef",
    "ModuleScope",
    "WalkResult",
    "Walker",
    "is_cli_default",
    "union",
]


class Walker(Statements, Expressions):
    """The abstract interpreter: ``Walker(sources).run()`` gives a :class:`WalkResult`."""

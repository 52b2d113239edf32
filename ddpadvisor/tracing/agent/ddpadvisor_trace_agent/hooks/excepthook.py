"""Hooks into torch: an uncaught exception is recorded before the process exits."""

from __future__ import annotations

import os
import sys
import time
import traceback
from typing import Any

from .. import runtime as rt

_AGENT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the agent package


def install() -> None:
    previous = sys.excepthook

    def excepthook(exc_type: Any, exc: Any, tb: Any) -> None:
        a = rt.AGENT
        if a is not None and a.active and a.writer.mine:
            frames = traceback.extract_tb(tb)
            user = [
                f for f in frames if "site-packages" not in f.filename and _AGENT not in f.filename
            ] or frames
            where = f"{user[-1].filename}:{user[-1].lineno}" if user else None
            a.safe(
                "end",
                a.record,
                {
                    "k": "exception",
                    "type": exc_type.__name__,
                    "msg": str(exc)[:500],
                    "where": where,
                    "s": a.step,
                    "wall": time.time(),
                },
            )
            a.safe("end", a.write_pending_step)
            a.safe("end", a.writer.flush)
        previous(exc_type, exc, tb)

    sys.excepthook = excepthook
    rt.on_undo(lambda: setattr(sys, "excepthook", previous))


def uninstall() -> None:
    """Take this patch's wrappers and hooks back out."""
    rt.undo("excepthook")

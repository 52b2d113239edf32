"""Hooks into what the job prints: ``print`` and the ``logging`` records a logger emits, for
the decimal numbers in them, so that the reader can tell which loss a person watching the log
sees (rank 0's own, the average over ranks, the sum, the value still divided for accumulation).

Only numbers are kept, never the text: per printed line the record ``out`` holds the optimizer
step count at the time (``s``), the backwards already run in the step under way (``b``) and up
to ``MAX_NUMBERS`` pairs ``[value, decimals]`` (``decimals`` is the number of digits printed
after the point, -1 for a number in exponent notation). A line without a decimal point or an
exponent in it (an epoch or step counter alone) records nothing. ``tqdm`` bars write through
neither entry point and are not read.
"""

from __future__ import annotations

import builtins
import logging
import re
from typing import Any

from .. import runtime as rt
from ..core import Agent
from ..runtime import _busy, _compiling, _wrap

MAX_NUMBERS = 6  # per line
MAX_LINES = 2000  # per process: a job that prints every micro-batch stays small
MAX_CHARS = 2000  # of one line's text searched for numbers
_NUMBER = re.compile(r"(?<![\w.])[-+]?(\d+\.(\d*)|\.(\d+)|\d+(?:\.\d*)?[eE][-+]?\d+)(?![\w.])")


def install() -> None:
    def make_print(orig: Any) -> Any:
        def print_(*args: Any, **kwargs: Any) -> Any:
            out = orig(*args, **kwargs)
            a = rt.AGENT
            if a is not None and a.active and not _busy() and not _compiling():
                a.safe("output", _printed, a, args, kwargs.get("sep"))
            return out

        return print_

    def make_handle(orig: Any) -> Any:
        def handle(self: Any, record: Any) -> Any:
            a = rt.AGENT
            if a is not None and a.active and not _busy() and not _compiling():
                a.safe("output", _logged, a, record)
            return orig(self, record)

        return handle

    _wrap(builtins, "print", "output.print", make_print)
    _wrap(logging.Logger, "handle", "output.handle", make_handle)


def _printed(a: Agent, args: tuple[Any, ...], sep: Any) -> None:
    if not args:
        return
    joiner = sep if isinstance(sep, str) else " "
    text = joiner.join(_text(x) for x in args[:16])
    _numbers(a, text)


def _logged(a: Agent, record: Any) -> None:
    # libraries' own records, except the Trainer's loss lines
    library = record.name.startswith(("torch", "deepspeed", "accelerate", "transformers"))
    if library and record.name != "transformers.trainer":
        return
    _numbers(a, str(record.getMessage()))


def _text(x: Any) -> str:
    """Only plain values: a tensor's ``str`` would read it (a GPU sync); it is skipped."""
    if isinstance(x, (str, int, float)):
        return str(x)
    if isinstance(x, dict):
        return ", ".join(f"{k}: {v}" for k, v in list(x.items())[:16] if isinstance(v, float))
    return ""


def _numbers(a: Agent, text: str) -> None:
    if a.out_lines >= MAX_LINES or ("." not in text and "e" not in text.lower()):
        return
    found: list[list[float | int]] = []
    for m in _NUMBER.finditer(text[:MAX_CHARS]):
        raw = m.group(1)
        if "e" in raw.lower():
            decimals = -1
        elif m.group(2) is not None:
            decimals = len(m.group(2))
        else:
            decimals = len(m.group(3) or "")
        try:
            value = float(m.group(0))
        except ValueError:
            continue
        found.append([value, decimals])
        if len(found) >= MAX_NUMBERS:
            break
    if not found:
        return
    a.out_lines += 1
    a.record({"k": "out", "s": a.step, "b": len(a.window.backwards), "n": found})


def uninstall() -> None:
    """Take this patch's wrappers back out."""
    rt.undo("output")

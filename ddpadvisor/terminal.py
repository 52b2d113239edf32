"""What reaches a terminal: text from files, answers and traces shown, never obeyed.

A value read from a trace folder someone shared, an answers file or ``--set`` may hold escape
sequences (clear the screen, retitle the window, hide text) or bidi overrides that reorder what
is shown. :func:`shown` writes every such character as a visible escape (``\\x1b``,
``\\u202e``); :func:`emit` is the one way the commands write text for people, and
:func:`emit_json` the way they write JSON, which stays exact (JSON escapes control characters
itself; a lone surrogate, which no UTF-8 stream can carry, is written as its JSON escape).

:func:`guard_streams` makes stdout and stderr write any character, whatever the locale's
encoding (``PYTHONIOENCODING=ascii``, ``LC_ALL=POSIX``): what the encoding lacks is written as a
backslash escape instead of failing.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from pydantic import BaseModel

# C0 controls but newline and tab, DEL, C1 controls, the bidi embeddings, overrides and
# isolates, the direction marks, and lone surrogates (which no UTF-8 stream can carry).
_UNSAFE = [
    *range(0x00, 0x09),
    *range(0x0B, 0x20),
    *range(0x7F, 0xA0),
    0x061C,
    0x200E,
    0x200F,
    *range(0x202A, 0x202F),
    *range(0x2066, 0x206A),
    *range(0xD800, 0xE000),
]


def _escape(code: int) -> str:
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}"


_TABLE = {code: _escape(code) for code in _UNSAFE}
_LINE_TABLE = {**_TABLE, 0x0A: "\\n", 0x09: "\\t"}


def shown(text: Any, *, one_line: bool = False) -> str:
    """``text`` with every control, bidi and surrogate character written as an escape.

    Newlines and tabs stay unless ``one_line`` (an error line, a table cell)."""
    return str(text).translate(_LINE_TABLE if one_line else _TABLE)


def guard_streams() -> None:
    """Let stdout and stderr write every character: escapes where the encoding has none."""
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper) and stream.errors != "backslashreplace":
            # a detached or closed stream is left as it is
            with contextlib.suppress(ValueError, OSError):
                stream.reconfigure(errors="backslashreplace")


def emit(text: str, stream: TextIO | None = None) -> None:
    """Write text meant for a person: every value in it shown, never obeyed."""
    (stream or sys.stdout).write(shown(text))


def json_text(model: BaseModel) -> str:
    """A model as indented JSON, exact; a lone surrogate (from a file's ``\\ud800``) becomes
    its JSON escape instead of failing, as no UTF-8 stream can carry it raw."""
    try:
        return model.model_dump_json(indent=2)
    except ValueError:  # PydanticSerializationError: a surrogate in some string
        text = json.dumps(model.model_dump(mode="json"), indent=2, ensure_ascii=False)
        return "".join(f"\\u{ord(c):04x}" if 0xD800 <= ord(c) < 0xE000 else c for c in text)


def emit_json(model: BaseModel, stream: TextIO | None = None) -> None:
    """Write a model as one JSON document (exact: JSON escapes control characters itself)."""
    (stream or sys.stdout).write(json_text(model) + "\n")

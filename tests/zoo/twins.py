"""The repaired twin of a faulty zoo script, written from the script's own ``# fix:`` notes.

A faulty line carries its repair as a trailing comment ``# fix: SPEC``:

* ``-`` deletes the line;
* otherwise SPEC is one or more lines joined by `` || ``, each replacing the faulty line at its
  indentation; ``=`` stands for the faulty line itself (so ``= || x()`` inserts after it and
  ``x() || =`` before it); each leading ``>`` indents one level (4 spaces) deeper, each ``<``
  one level shallower.

The notes are read and applied by tests/support/notes.py, which also writes the faulty
variants of the framework zoo's correct scripts from their ``# fault NAME:`` notes.

The twins are not kept as files (they would be near-copies); tests write them into a
temporary folder with :func:`write_fixed`.
"""

from __future__ import annotations

import sys
from pathlib import Path

ZOO = Path(__file__).resolve().parent
sys.path.insert(0, str(ZOO.parent / "support"))
import notes  # noqa: E402  (tests/support/notes.py)


def fixed_source(text: str) -> str:
    return notes.written(text, notes.FIX)


def has_fix(name: str) -> bool:
    return notes.FIX in notes.keys((ZOO / name).read_text())


def write_fixed(name: str, dest: Path) -> Path:
    """Write the repaired twin of ``tests/zoo/<name>`` as ``dest/<name>``; returns its path."""
    dest.mkdir(parents=True, exist_ok=True)
    path = dest / name
    path.write_text(fixed_source((ZOO / name).read_text()))
    return path

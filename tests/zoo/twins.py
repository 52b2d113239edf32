"""The repaired twin of a faulty zoo script, written from the script's own ``# fix:`` notes.

A faulty line carries its repair as a trailing comment ``# fix: SPEC``:

* ``-`` deletes the line;
* otherwise SPEC is one or more lines joined by `` || ``, each replacing the faulty line at its
  indentation; ``=`` stands for the faulty line itself (so ``= || x()`` inserts after it and
  ``x() || =`` before it); each leading ``>`` indents one level (4 spaces) deeper, each ``<``
  one level shallower.

The twins are not kept as files (they would be near-copies); tests write them into a
temporary folder with :func:`write_fixed`.
"""

from __future__ import annotations

import re
from pathlib import Path

ZOO = Path(__file__).resolve().parent
NOTE = re.compile(r"^(?P<code>.*?)\s+# fix: (?P<spec>.*)$")


def fixed_source(text: str) -> str:
    out: list[str] = []
    for line in text.splitlines():
        m = NOTE.match(line)
        if m is None:
            out.append(line)
            continue
        code, spec = m.group("code"), m.group("spec").strip()
        if spec == "-":
            continue
        indent = len(code) - len(code.lstrip())
        for part in spec.split(" || "):
            if part == "=":
                out.append(code)
                continue
            depth = indent
            while part[:1] in (">", "<"):
                depth += 4 if part[0] == ">" else -4
                part = part[1:]
            out.append(" " * max(0, depth) + part)
    return "\n".join(out) + "\n"


def has_fix(name: str) -> bool:
    return " # fix: " in (ZOO / name).read_text()


def write_fixed(name: str, dest: Path) -> Path:
    """Write the repaired twin of ``tests/zoo/<name>`` as ``dest/<name>``; returns its path."""
    dest.mkdir(parents=True, exist_ok=True)
    path = dest / name
    path.write_text(fixed_source((ZOO / name).read_text()))
    return path

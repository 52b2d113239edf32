"""Scripts written from trailing line notes in another script (tests only).

A line carries notes as trailing comments, each ``# KEY: SPEC``, where KEY is ``fix`` (the
repaired twin of a faulty zoo script, tests/zoo/twins.py) or ``fault NAME`` (the faulty
variant NAME of a correct framework script, tests/frameworks/cases.py). One line may carry
several notes, for different keys: ``x = f()  # fault a: -  # fault b: x = g()``.

The script written for KEY is the annotated script with every line that carries a KEY note
changed by its SPEC, and every note (of any key) taken off the lines:

* ``-`` deletes the line;
* otherwise SPEC is one or more lines joined by `` || ``, each replacing the annotated line at
  its indentation; ``=`` stands for the annotated line itself (so ``= || x()`` inserts after it
  and ``x() || =`` before it); each leading ``>`` indents one level (4 spaces) deeper, each
  ``<`` one level shallower (``<=``: the line itself, one level shallower).
"""

from __future__ import annotations

import re

MARK = re.compile(r"\s+# (?P<key>fix|fault [A-Za-z0-9_.-]+): ")
FIX = "fix"


def fault(name: str) -> str:
    """The note key of the faulty variant ``name``."""
    return f"fault {name}"


def split_notes(line: str) -> tuple[str, dict[str, str]]:
    """The line's code (notes taken off) and its notes, ``{key: spec}``."""
    marks = list(MARK.finditer(line))
    if not marks:
        return line, {}
    ends = [m.start() for m in marks[1:]] + [len(line)]
    return line[: marks[0].start()], {
        m.group("key"): line[m.end() : end].strip() for m, end in zip(marks, ends)
    }


def keys(text: str) -> set[str]:
    """Every note key the text's lines carry."""
    return {k for line in text.splitlines() for k in split_notes(line)[1]}


def _replaced(code: str, spec: str) -> list[str]:
    if spec == "-":
        return []
    indent = len(code) - len(code.lstrip())
    out = []
    for part in spec.split(" || "):
        if part == "=":
            out.append(code)
            continue
        depth = indent
        while part[:1] in (">", "<"):
            depth += 4 if part[0] == ">" else -4
            part = part[1:]
        out.append(" " * max(0, depth) + (code.lstrip() if part == "=" else part))
    return out


def written(text: str, key: str) -> str:
    """The script the notes of ``key`` write from ``text`` (every note taken off)."""
    out: list[str] = []
    for line in text.splitlines():
        code, specs = split_notes(line)
        out.extend(_replaced(code, specs[key]) if key in specs else [code])
    return "\n".join(out) + "\n"

"""Installed library versions known to change what training computes, read from environment
dumps (``pip list`` / ``pip freeze``, ``collect_env``'s ``[pip3]`` lines, ``transformers-cli
env``). Each row of :data:`DEFECTS` names a package, the versions that have the defect, the
fact it sets and the release note or issue it was checked against. Only the defect is
recorded: a version outside the range says nothing about the cause (a hand-written loop
never runs the code that had it), so no row ever sets its fact to false.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ddpadvisor.evidence.files.found import Read
from ddpadvisor.evidence.files.text import Text


@dataclass(frozen=True)
class Defect:
    package: str  # as pip names it (compared case-insensitively, "-" and "_" alike)
    before: tuple[int, ...]  # versions below this have the defect
    since: tuple[int, ...]  # ... and at or above this
    fact: str
    why: str
    url: str


DEFECTS: tuple[Defect, ...] = (
    Defect(
        package="transformers",
        since=(0,),
        before=(4, 46),
        fact="trainer_loss_per_micro_batch",
        why=(
            "before 4.46 the Trainer averaged each micro-batch's loss over its own tokens and "
            "then averaged the micro-batches, so accumulation does not weight tokens equally"
        ),
        url="https://huggingface.co/blog/gradient_accumulation",
    ),
)

# "transformers 4.45.2" (pip list), "transformers==4.45.2" (pip freeze, collect_env's
# "[pip3] transformers==4.45.2"), "- `transformers` version: 4.45.2" (transformers-cli env)
_LINE = re.compile(
    r"^(?:\[(?:pip3?|conda)\]\s+)?(?:-\s+`)?(?P<name>[A-Za-z0-9_.-]+)`?"
    r"(?:\s+version:\s*|\s*==\s*|\s+)(?P<version>\d+(?:\.\d+)+)",
    re.M,
)


def _norm(name: str) -> str:
    return name.lower().replace("_", "-")


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(".")[:3])


def installed(text: str) -> dict[str, tuple[str, int]]:
    """Package name -> (version, 1-based line), first mention wins."""
    out: dict[str, tuple[str, int]] = {}
    for m in _LINE.finditer(text):
        name = _norm(m.group("name"))
        if name not in out:
            out[name] = (m.group("version"), text.count("\n", 0, m.start()) + 1)
    return out


def defects(doc: Text) -> Read:
    out = Read("environment")
    have = installed(doc.text)
    for row in DEFECTS:
        got = have.get(_norm(row.package))
        if got is None:
            continue
        version, line = got
        if row.since <= _version(version) < row.before:
            out.add(
                row.fact,
                True,
                doc.where(line),
                f"{row.package} {version}: {row.why} ({row.url})",
            )
    return out

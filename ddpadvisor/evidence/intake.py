"""Intake: a user's own description or forum post (English or Chinese) turned into facts.

The patterns are knowledge-base data: each fact's ``mentions`` list regular expressions (``en``
and ``zh``) for a value, or with a named group ``value`` that carries it. User rule folders
extend them like any other fact field, and rule tests with a ``text:`` check them. Every
finding keeps the phrase it came from, so the user can confirm or correct it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from ddpadvisor.errors import InputError
from ddpadvisor.kb.model import KnowledgeBase
from ddpadvisor.kb.values import Value, ValueProblem, parse_value
from ddpadvisor.observation import Gathered, Observation

MAX_TEXT = 200_000  # characters read from a description; a forum post is far shorter

# Counts people write out ("eight A100s", "四张卡") read as numbers when a mention's value group
# captures one.
NUMBER_WORDS = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "twelve": 12, "sixteen": 16, "thirty-two": 32, "sixty-four": 64,
    "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9,
    "十": 10, "十二": 12, "十六": 16,
}  # fmt: skip


@dataclass(frozen=True)
class Finding:
    """One fact read from the text: its typed value and the phrase that says so."""

    fact: str
    value: Value
    phrase: str
    start: int = 0


@cache
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.IGNORECASE)


def extract(kb: KnowledgeBase, text: str) -> list[Finding]:
    """The facts ``text`` states, at most one per fact, in the order they appear.

    Where several mentions of one fact match, the longest phrase wins ("without a
    DistributedSampler" over "DistributedSampler"); on a tie the earlier one.
    """
    text = text[:MAX_TEXT]
    best: dict[str, Finding] = {}
    for fact in kb.facts.values():
        for mention in fact.mentions:
            for pattern in (*mention.en, *mention.zh):
                for m in _compiled(pattern).finditer(text):
                    raw: object = mention.value
                    if "value" in m.re.groupindex and m.group("value") is not None:
                        raw = m.group("value").strip()
                        if fact.type in ("int", "float"):
                            raw = NUMBER_WORDS.get(str(raw).lower(), raw)
                    if raw is None:
                        continue
                    try:
                        value = parse_value(fact, raw)
                    except ValueProblem:
                        continue
                    if value is None:
                        continue
                    found = Finding(fact.id, value, m.group(0).strip(), m.start())
                    cur = best.get(fact.id)
                    if cur is None or (len(found.phrase), -found.start) > (
                        len(cur.phrase),
                        -cur.start,
                    ):
                        best[fact.id] = found
    return sorted(best.values(), key=lambda f: (f.start, f.fact))


def to_observations(findings: list[Finding], where: str) -> list[Observation]:
    return [
        Observation(
            fact=f.fact,
            value=f.value,
            source="answer",
            where=where,
            detail=f"from the description: \u201c{f.phrase}\u201d",
        )
        for f in findings
    ]


def read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")[:MAX_TEXT]
    except FileNotFoundError:
        raise InputError("no such file", path) from None
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", path) from None


def read_description(kb: KnowledgeBase, path: Path) -> Gathered:
    """Observations from a description file (``--describe FILE``)."""
    found = extract(kb, read_text(path))
    return Gathered(to_observations(found, path.name))

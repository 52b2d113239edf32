"""How closely a user's own description reads like each catalogued cause.

Every cause has an account in the knowledge base, in English and Chinese: its title and
mechanism, the reasons its evidence links give, its references' notes, the questions of the
facts it forces outright, and ``reports`` — how people typically describe this problem in a
post or an issue. A description is compared with each account by the terms they share
(``kb/terms.py``: word stems and Chinese bigrams). Each term weighs by how few accounts use it
(inverse document frequency) times a sublinear count of the account entries that use it; both
sides are normalised, so the score is a cosine in [0, 1] that does not grow with the length of
the description. A match resting on one or two common terms is scaled down.

A description that shares many rare terms with one account ("set_epoch", "same order every
epoch") points at that cause; the engine turns a score above a floor into evidence for it
(``kb/levels.py``), and the output shows the shared words, so the user sees why.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from ddpadvisor.kb import levels
from ddpadvisor.kb.model import KnowledgeBase
from ddpadvisor.kb.schema import Cause
from ddpadvisor.kb.terms import term_forms

MAX_TEXT = 200_000  # characters of a description that are read
SHOWN_TERMS = 6  # shared words listed per cause
# A description sharing a single word with an account ("world", "curve") is no description of
# that cause: it needs this many shared terms, and their summed weight (idf) must reach
# MIN_SHARED for a full score (two or three rare terms do).
MIN_SHARED_TERMS = 2
MIN_SHARED = 6.0


@dataclass(frozen=True)
class Resemblance:
    """How much a description reads like one cause, and the words that say so."""

    cause: str
    score: float  # cosine of the two term vectors, in [0, 1]
    words: tuple[str, ...]  # the description's words that weigh most in the match


def account(kb: KnowledgeBase, cause: Cause) -> list[str]:
    """The entries of the cause's account, each a piece of text in either language."""
    out = [cause.title, cause.mechanism, *cause.reports]
    for zh_field in ("title", "mechanism", "reports"):
        value = (cause.zh or {}).get(zh_field)
        if isinstance(value, str):
            out.append(value)
        elif isinstance(value, list):
            out.extend(str(v) for v in value)
    out.extend(link.why for link in cause.evidence if link.why)
    out.extend(ref.note for ref in cause.references if ref.note)
    for link in cause.evidence:
        # a fact the cause forces outright names what a reporter of it sees or did
        fact = kb.facts.get(link.fact)
        strong = (
            link.strength is not None
            and levels.strength(link.strength) >= levels.STRENGTH["strong"]
        )
        if fact is not None and strong:
            out.append(fact.question)
    return [e for e in out if e]


class ResemblanceIndex:
    """Every cause's account as a weighted term vector; build once per knowledge base."""

    def __init__(self, kb: KnowledgeBase) -> None:
        counts: dict[str, Counter[str]] = {}
        for cid, cause in kb.causes.items():
            c: Counter[str] = Counter()
            for entry in account(kb, cause):
                c.update(term_forms(entry).keys())
            counts[cid] = c
        df: Counter[str] = Counter(t for c in counts.values() for t in c)
        n = len(counts)
        # a term every account uses says nothing; one used by a single account says most
        self.idf = {t: math.log(n / k) for t, k in df.items() if k < n}
        self.vectors = {cid: self._unit(c) for cid, c in counts.items()}

    def _unit(self, counts: Counter[str] | dict[str, int]) -> dict[str, float]:
        vec = {
            t: self.idf[t] * (1.0 + math.log(k)) for t, k in counts.items() if t in self.idf and k
        }
        norm = math.sqrt(sum(x * x for x in vec.values()))
        return {t: x / norm for t, x in vec.items()} if norm else {}

    def resemble(self, text: str) -> list[Resemblance]:
        """Every cause the description shares a weighted term with, best first."""
        forms = term_forms(text[:MAX_TEXT])
        query = self._unit(dict.fromkeys(forms, 1))
        out = []
        for cid, vec in self.vectors.items():
            shared = {t: q * vec[t] for t, q in query.items() if t in vec}
            if len(shared) < MIN_SHARED_TERMS:
                continue
            score = sum(shared.values()) * min(1.0, sum(self.idf[t] for t in shared) / MIN_SHARED)
            if score <= 0:
                continue
            top = sorted(shared, key=lambda t: (-shared[t], t))[:SHOWN_TERMS]
            out.append(Resemblance(cid, min(1.0, score), tuple(forms[t] for t in top)))
        out.sort(key=lambda r: (-r.score, r.cause))
        return out


_LAST: list[tuple[KnowledgeBase, ResemblanceIndex]] = []


def index_for(kb: KnowledgeBase) -> ResemblanceIndex:
    """The index of ``kb``'s causes; the last one built is kept for the next description."""
    if not _LAST or _LAST[0][0] is not kb:
        _LAST[:] = [(kb, ResemblanceIndex(kb))]
    return _LAST[0][1]


def resemble(kb: KnowledgeBase, texts: Iterable[str]) -> list[Resemblance]:
    """How the descriptions, read together, resemble each cause; only causes at or above the
    floor where the engine starts to count it, best first."""
    joined = "\n\n".join(t for t in texts if t.strip())
    if not joined.strip():
        return []
    found = index_for(kb).resemble(joined)
    return [r for r in found if r.score >= levels.RESEMBLANCE_FLOOR]

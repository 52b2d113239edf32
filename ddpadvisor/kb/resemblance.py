"""How closely a user's own description reads like each catalogued cause.

Every cause has an account in the knowledge base: its title and mechanism (English and
Chinese), the reasons its evidence links give, its references' notes, the questions of the
facts it forces outright, and ``reports``, how people typically describe this problem in a post
or an issue (English and Chinese lines side by side). A description is compared with each
account by the terms they share (``kb/terms.py``: word stems and Chinese bigrams; numbers left
out). Each term weighs by how few accounts use it (inverse document frequency) times a sublinear
count of the account's entries that use it; both sides are normalised, so a score is a cosine in
[0, 1] that does not grow with the length of the description. A cause's score is the mean of the
cosine with its whole account and the cosine with its closest single entry, scaled down when the
shared words are too few or too common to mean anything.

A long description shares a few words with many accounts, so what the engine counts
(``kb/levels.py``) is how far a cause's score stands above the other causes' (``standout``, in
their standard deviations), once the score reaches a floor. The output shows the shared words,
so the user sees why.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from ddpadvisor.kb import levels
from ddpadvisor.kb.model import KnowledgeBase
from ddpadvisor.kb.schema import Cause
from ddpadvisor.kb.terms import CJK, term_forms

MAX_TEXT = 200_000  # characters of a description that are read
SHOWN_TERMS = 6  # shared words listed per cause
# A description sharing a single word with an account ("world", "curve") is no description of
# that cause: it needs this many shared terms, and their summed weight (idf) must reach
# MIN_SHARED for a full score (three or four rare terms do; a one-line generic complaint such
# as 多卡训练 loss 不收敛 does not).
MIN_SHARED_TERMS = 2
MIN_SHARED = 10.0
# The least spread the other causes' scores are taken to have (see _with_standout).
SPREAD_FLOOR = 0.03


@dataclass(frozen=True)
class Resemblance:
    """How much a description reads like one cause, and the words that say so."""

    cause: str
    score: float  # cosine of the two term vectors, in [0, 1]
    words: tuple[str, ...]  # the description's words that weigh most in the match
    # how far the score stands above the other causes': (score - their mean) / their spread
    standout: float = 0.0


def account(kb: KnowledgeBase, cause: Cause) -> list[str]:
    """The entries of the cause's account, each a piece of text in either language."""
    out = [cause.title, cause.mechanism, *cause.reports]
    for zh_field in ("title", "mechanism"):
        value = (cause.zh or {}).get(zh_field)
        if isinstance(value, str):
            out.append(value)
    # a cause's modes' links are part of its account (their titles only label the modes)
    links = [*cause.evidence, *(link for mode in cause.modes for link in mode.evidence)]
    out.extend(link.why for link in links if link.why)
    out.extend(ref.note for ref in cause.references if ref.note)
    for link in links:
        # a fact the cause forces outright names what a reporter of it sees or did
        fact = kb.facts.get(link.fact)
        strong = (
            link.strength is not None
            and levels.strength(link.strength) >= levels.STRENGTH["strong"]
        )
        if fact is not None and strong:
            out.append(_ASIDE.sub(" ", fact.question))
    return [e for e in out if e]


# A question's asides in brackets say where to look ("iterations in the progress bar"), not
# what the reporter saw: left out of the account, such words made any post that mentions a
# progress bar read like the cause.
_ASIDE = re.compile(r"\s*[(（][^()（）]*[)）]")


def _shown(text: str, forms: dict[str, str], shared: dict[str, float]) -> tuple[str, ...]:
    """The words to show for a match, heaviest first: English words as the user wrote them, and
    Chinese as the longest runs of the text whose every bigram is shared (一直沿用, not 直沿)."""
    weight: dict[str, float] = {forms[t]: w for t, w in shared.items() if not CJK.match(t)}
    for run in CJK.findall(unicodedata.normalize("NFKC", text).lower()):
        i = 0
        while i < len(run) - 1:
            j = i
            while j < len(run) - 1 and run[j : j + 2] in shared:
                j += 1
            if j > i:
                piece = run[i : j + 1]
                w = sum(shared[run[k : k + 2]] for k in range(i, j))
                weight[piece] = max(weight.get(piece, 0.0), w)
                i = j
            else:
                i += 1
    return tuple(sorted(weight, key=lambda w: (-weight[w], w))[:SHOWN_TERMS])


# Numbers say how much, not what: 8 GPUs, lr 3e-4, batch 32 match every account that gives an
# example number (including "1e", the stem of "1e-8").
_NUMERIC = re.compile(r"x?[0-9]+(?:\.[0-9]+)*e?x?")


def _terms(text: str) -> dict[str, str]:
    """The terms of ``text`` that can make it resemble an account (numbers left out)."""
    return {t: f for t, f in term_forms(text).items() if not _NUMERIC.fullmatch(t)}


def _with_standout(found: list[Resemblance], causes: int) -> list[Resemblance]:
    """Each resemblance with how far its score stands above the other causes' scores (their
    mean and spread, a cause that shares nothing at 0; the spread at least SPREAD_FLOOR, so a
    knowledge base of a few causes, or a text that matches one alone, is judged the same way
    as the bundled one)."""
    total = sum(r.score for r in found)
    squares = sum(r.score * r.score for r in found)
    others = max(causes - 1, 1)
    out = []
    for r in found:
        mean = (total - r.score) / others
        var = max(0.0, (squares - r.score * r.score) / others - mean * mean)
        spread = max(math.sqrt(var), SPREAD_FLOOR)
        out.append(replace(r, standout=(r.score - mean) / spread))
    return out


def _word_share(term: str) -> float:
    """How much of a word a term is: a Chinese word of three characters gives two overlapping
    bigrams (不收敛: 不收, 收敛), which together count as one word, not two."""
    return 0.5 if CJK.match(term) else 1.0


class ResemblanceIndex:
    """Every cause's account, whole and entry by entry, as weighted term vectors; build once
    per knowledge base."""

    def __init__(self, kb: KnowledgeBase) -> None:
        counts: dict[str, Counter[str]] = {}
        entries: dict[str, list[dict[str, str]]] = {}
        for cid, cause in kb.causes.items():
            c: Counter[str] = Counter()
            entries[cid] = [_terms(entry) for entry in account(kb, cause)]
            for forms in entries[cid]:
                c.update(forms.keys())
            counts[cid] = c
        df: Counter[str] = Counter(t for c in counts.values() for t in c)
        n = len(counts)
        # a term every account uses says nothing; one used by a single account says most
        self.idf = {t: math.log(n / k) for t, k in df.items() if k < n}
        self.vectors = {cid: self._unit(c) for cid, c in counts.items()}
        self.entries = {
            cid: [v for v in (self._unit(dict.fromkeys(f, 1)) for f in forms) if v]
            for cid, forms in entries.items()
        }

    def _unit(self, counts: Counter[str] | dict[str, int]) -> dict[str, float]:
        vec = {
            t: self.idf[t] * (1.0 + math.log(k)) for t, k in counts.items() if t in self.idf and k
        }
        norm = math.sqrt(sum(x * x for x in vec.values()))
        return {t: x / norm for t, x in vec.items()} if norm else {}

    def _cosine(self, query: dict[str, float], vec: dict[str, float]) -> dict[str, float]:
        """The shared terms' products, or nothing when too few words are shared."""
        shared = {t: q * vec[t] for t, q in query.items() if t in vec}
        return shared if sum(map(_word_share, shared)) >= MIN_SHARED_TERMS else {}

    def _score(self, shared: dict[str, float]) -> float:
        mass = sum(self.idf[t] * _word_share(t) for t in shared)
        return sum(shared.values()) * min(1.0, mass / MIN_SHARED)

    def resemble(self, text: str) -> list[Resemblance]:
        """Every cause the description shares weighted terms with, best first.

        The score is the mean of two cosines: with the whole account (the description covers
        what the cause is about) and with its closest single entry (the description reads like
        one typical report of it, as a user rule's one added report should count)."""
        forms = _terms(text[:MAX_TEXT])
        query = self._unit(dict.fromkeys(forms, 1))
        out = []
        for cid, vec in self.vectors.items():
            shared = self._cosine(query, vec)
            if not shared:
                continue
            closest = max(
                (self._score(self._cosine(query, e)) for e in self.entries[cid]), default=0.0
            )
            score = (self._score(shared) + closest) / 2
            if score <= 0:
                continue
            shown = _shown(text[:MAX_TEXT], forms, shared)
            out.append(Resemblance(cid, min(1.0, score), shown))
        out = _with_standout(out, len(self.vectors))
        out.sort(key=lambda r: (-r.score, r.cause))
        return out


# A sentence that asks ("is it torch.compile or DDP?", "是不是 DDP 的问题？") names a suspect, and
# a suspect is no observation: such sentences are left out before the text is compared.
# A sentence ends at CJK end punctuation, at ASCII end punctuation before a space or the end
# ("torch.compile" is one word), or at a line break.
_SENTENCE_END = re.compile(r"[。！？]+|[.!?]+(?=\s|$)|\n")
_ASKS = re.compile(r"(?:[?？]+|[吗呢嘛][.!。！]*)\s*$")


def statements(text: str) -> str:
    """``text`` without its questions (sentences ending in a question mark, or in 吗/呢)."""
    text = text[:MAX_TEXT]
    if not any(c in text for c in "?？吗呢嘛"):
        return text
    kept: list[str] = []
    start = 0
    for m in _SENTENCE_END.finditer(text):
        sentence = text[start : m.end()]
        start = m.end()
        if not _ASKS.search(sentence):
            kept.append(sentence)
    if not _ASKS.search(text[start:]):
        kept.append(text[start:])
    return "".join(kept)


_LAST: list[tuple[KnowledgeBase, ResemblanceIndex]] = []


def index_for(kb: KnowledgeBase) -> ResemblanceIndex:
    """The index of ``kb``'s causes; the last one built is kept for the next description."""
    if not _LAST or _LAST[0][0] is not kb:
        _LAST[:] = [(kb, ResemblanceIndex(kb))]
    return _LAST[0][1]


def log_lr(r: Resemblance) -> float:
    """The evidence a resemblance gives its cause (natural log of a likelihood ratio, kb/levels.py):
    0 below the floor or without standing out among the causes, capped at RESEMBLANCE_MAX."""
    if r.score < levels.RESEMBLANCE_FLOOR:
        return 0.0
    lr = levels.RESEMBLANCE_SLOPE * (r.standout - levels.RESEMBLANCE_STANDOUT)
    return max(0.0, min(lr, levels.RESEMBLANCE_MAX))


def resemble(kb: KnowledgeBase, texts: Iterable[str]) -> list[Resemblance]:
    """How the descriptions, read together, resemble each cause; only the causes that count
    as evidence (``log_lr`` above 0), best first."""
    return resemble_readings(kb, ["\n\n".join(t for t in texts if t.strip())])


def resemble_readings(kb: KnowledgeBase, readings: Sequence[str]) -> list[Resemblance]:
    """Several readings of one description (e.g. as pasted, and its prose alone), each judged
    against the accounts on its own; a cause counts at its strongest reading, so two readings
    never add up. Only the causes that count as evidence, best first."""
    index = index_for(kb)
    best: dict[str, Resemblance] = {}
    for reading in readings:
        reading = statements(reading)
        if not reading.strip():
            continue
        for r in index.resemble(reading):
            held = best.get(r.cause)
            if log_lr(r) > 0 and (
                held is None or (log_lr(r), r.score) > (log_lr(held), held.score)
            ):
                best[r.cause] = r
    return sorted(best.values(), key=lambda r: (-r.score, r.cause))

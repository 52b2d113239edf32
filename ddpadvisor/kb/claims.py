"""Look up forum advice in the KB's claims: "is this tip true?".

A pasted tip (English or Chinese, a short paraphrase or a whole forum answer) is matched
against every claim's English and Chinese text and keywords. Latin words and Chinese
character bigrams are the terms; each is weighted by its inverse document frequency over the
claims. A claim's score is the geometric mean of two coverages, the share of the query's
weight the claim matches and the share of the claim's weight the query matches, taken in the
claim's better language (English, Chinese or both), and scaled down when the matched weight
is too small to mean anything. A pasted answer is also scored sentence by sentence and
clause by clause, since it usually gives several tips. Scores lie in [0, 1], so one
threshold serves a five-word tip and a whole answer; below it the lookup says "no close
match" instead of offering an unrelated row that would read like a verdict.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass

from ddpadvisor.i18n import as_lang, text
from ddpadvisor.kb.model import KnowledgeBase
from ddpadvisor.kb.schema import Claim
from ddpadvisor.kb.terms import CJK, has_cjk, terms

# Below this score a row is not offered as the answer (chosen in bench/claims_lookup.py).
THRESHOLD = 0.27

_SENTENCE = re.compile(r"[。！？!?；;\n]+|(?<=[a-z)])\.\s+")
_CLAUSE = re.compile(r"[，,、：:（）()]+")
# Weight of a query term that no claim contains: it lowers the query's coverage, since the
# query talks about something else too. An unknown English word is a whole word (wandb,
# tensorboard) and weighs more than the rarest claim term (idf about 4.1); an unknown Chinese
# bigram is mostly the seam between two words (e.g. 时换 in 训练时换成) and weighs little.
_UNSEEN_LATIN = 5.0
_UNSEEN_CJK = 1.0
# An English keyword phrase of at least this many words, found whole in the query, stands
# for the claim: the claim counts as fully covered.
_PHRASE_TERMS = 3
# A claim needs at least this much matched weight (one rare term, or several common ones)
# for full marks; a query of one generic word (DDP, lr, loss) is no tip at all.
MIN_EVIDENCE = 5.0


@dataclass(frozen=True)
class View:
    """One language of a claim: the terms a query can match, and those of its text alone."""

    terms: frozenset[str]
    text: frozenset[str]
    phrases: tuple[frozenset[str], ...] = ()


def _views(claim: Claim) -> tuple[View, ...]:
    """The claim's English, Chinese and combined views (keywords join their language)."""
    latin_kw = [k for k in claim.keywords if not has_cjk(k)]
    cjk_kw = [k for k in claim.keywords if has_cjk(k)]
    en_text = terms(claim.text)
    zh_value = (claim.zh or {}).get("text")
    zh_text = terms(zh_value) if isinstance(zh_value, str) else set()
    en = en_text | terms(" ; ".join(latin_kw))
    zh = zh_text | terms(" ; ".join(cjk_kw))
    en_phrases = _phrases(latin_kw)
    return (
        View(frozenset(en), frozenset(en_text), en_phrases),
        View(frozenset(zh), frozenset(zh_text or zh)),
        View(frozenset(en | zh), frozenset(en_text | zh_text), en_phrases),
    )


def _phrases(keywords: list[str]) -> tuple[frozenset[str], ...]:
    """English keyword phrases specific enough to stand for the claim (3+ words).

    Chinese keywords are not used this way: a four-character word is already three bigrams,
    which unrelated text contains by accident.
    """
    return tuple(p for p in (frozenset(terms(k)) for k in keywords) if len(p) >= _PHRASE_TERMS)


@dataclass(frozen=True)
class Match:
    score: float
    claim: Claim


class ClaimIndex:
    """Claims indexed for lookup; build once per KB."""

    def __init__(self, claims: list[Claim]) -> None:
        self.claims = claims
        self.views = [_views(c) for c in claims]
        df: dict[str, int] = {}
        for views in self.views:
            for t in views[-1].terms:
                df[t] = df.get(t, 0) + 1
        n = len(claims)
        self.idf = {t: math.log(1 + (n - k + 0.5) / (k + 0.5)) for t, k in df.items()}

    def _weight(self, t: str) -> float:
        if t in self.idf:
            return self.idf[t]
        return _UNSEEN_CJK if CJK.match(t) else _UNSEEN_LATIN

    def score(self, query: frozenset[str], view: View) -> float:
        """sqrt(query coverage x claim coverage), scaled down when little matched at all.

        The claim's length is its text plus the keyword terms the query matched: unmatched
        keywords do not count against it. A whole English keyword phrase in the query
        covers the claim fully.
        """
        hits = query & view.terms
        matched = sum(self._weight(t) for t in hits)
        if not matched:
            return 0.0
        q_total = sum(self._weight(t) for t in query)
        d_total = sum(self._weight(t) for t in view.text | hits)
        phrase = any(p <= query for p in view.phrases)
        claim_cover = 1.0 if phrase else matched / d_total
        evidence = min(1.0, matched / MIN_EVIDENCE)
        return evidence * math.sqrt((matched / q_total) * claim_cover)

    def search(self, text: str) -> list[Match]:
        """Every claim with a nonzero score, best first.

        A pasted answer usually gives several tips, one per sentence or clause: each
        sentence and each clause is scored on its own as well as the whole text, and a
        claim keeps its best score.
        """
        sentences = [p for p in _SENTENCE.split(text) if p.strip()]
        pieces = [text, *sentences]
        pieces += [c for p in sentences for c in _CLAUSE.split(p) if c.strip()]
        queries = [q for q in dict.fromkeys(frozenset(terms(p)) for p in pieces) if q]
        found = []
        for claim, views in zip(self.claims, self.views, strict=True):
            s = max((self.score(q, v) for q in queries for v in views), default=0.0)
            if s > 0:
                found.append(Match(s, claim))
        found.sort(key=lambda m: (-m.score, m.claim.id))
        return found


_LAST: list[tuple[KnowledgeBase, ClaimIndex]] = []


def index_for(kb: KnowledgeBase) -> ClaimIndex:
    """The index of ``kb``'s claims; the last one built is kept for the next lookup."""
    if not _LAST or _LAST[0][0] is not kb:
        _LAST[:] = [(kb, ClaimIndex(list(kb.claims.values())))]
    return _LAST[0][1]


def lookup(
    kb: KnowledgeBase,
    text: str,
    *,
    verdict: str | None = None,
    limit: int = 5,
    threshold: float = THRESHOLD,
) -> list[tuple[float, Claim]]:
    """Claims that match ``text`` at ``threshold`` or above, best first, at most ``limit``.

    An empty (or wordless) ``text`` lists every claim, filtered by ``verdict``, with score 1.
    An empty result means no close match.
    """
    if not terms(text):
        return [(1.0, c) for c in kb.claims.values() if verdict is None or c.verdict == verdict]
    found = [
        (m.score, m.claim)
        for m in index_for(kb).search(text)
        if m.score >= threshold and (verdict is None or m.claim.verdict == verdict)
    ]
    return found[:limit]


def _field(claim: Claim, name: str, lang: str) -> str:
    return " ".join(str(text(claim, name, as_lang(lang))).split())


_VERDICT_ZH = {"correct": "正确", "partly-correct": "部分正确", "myth": "误解", "harmful": "有害"}
_WORDS = {
    "en": {
        "none": "No close match: no claim in the knowledge base is close to that advice "
        "(best score {best:.2f}, threshold {threshold:.2f}).",
        "why": "why",
        "see": "see",
        "match": "match",
    },
    "zh": {
        "none": "no close match：知识库里没有与这条建议相近的说法"
        "（最高分 {best:.2f}，阈值 {threshold:.2f}）。",
        "why": "理由",
        "see": "参考",
        "match": "匹配",
    },
}


def render_claims(
    found: list[tuple[float, Claim]],
    *,
    as_json: bool,
    query: str = "",
    lang: str = "en",
    best: float = 0.0,
    threshold: float = THRESHOLD,
) -> str:
    """Text or JSON for a lookup's result.

    ``query`` empty means a listing (no scores shown). ``best`` is the best score of any claim,
    shown when nothing reached ``threshold``.
    """
    listing = not terms(query)
    if as_json:
        rows = [
            {
                **({} if listing else {"match": round(s, 3)}),
                **c.model_dump(exclude_none=True, by_alias=True),
            }
            for s, c in found
        ]
        doc = {
            "query": query,
            "lang": lang,
            "threshold": threshold,
            "close_match": bool(found) or listing,
            "claims": rows,
        }
        return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
    words = _WORDS.get(lang, _WORDS["en"])
    if not found:
        return words["none"].format(best=best, threshold=threshold) + "\n"
    out = []
    for s, c in found:
        verdict = c.verdict.upper() if lang != "zh" else f"{_VERDICT_ZH[c.verdict]} {c.verdict}"
        score = "" if listing else f"{words['match']} {s:.2f}  "
        out.append(f"{score}[{verdict}] {_field(c, 'text', lang)}  ({', '.join(c.provenance)})")
        out.append(f"  {words['why']}: {_field(c, 'reason', lang)}")
        refs = [r.url for r in c.references] + ([c.experiment] if c.experiment else [])
        if refs:
            out.append(f"  {words['see']}: {'; '.join(refs)}")
        out.append("")
    return "\n".join(out)

"""Look up forum advice in the KB's claims: "is this tip true?"."""

from __future__ import annotations

import json
import re

from ddpadvisor.kb.model import KnowledgeBase
from ddpadvisor.kb.schema import Claim

_WORD = re.compile(r"[a-z0-9_]+")
_CJK = re.compile(r"[\u4e00-\u9fff]+")
_STOP = {
    "the",
    "a",
    "an",
    "to",
    "of",
    "and",
    "or",
    "is",
    "in",
    "on",
    "it",
    "be",
    "with",
    "for",
    "your",
    "you",
    "try",
    "that",
    "this",
    "if",
    "by",
    "at",
    "as",
    "are",
    "do",
    "does",
}


def _words(text: str) -> set[str]:
    """Lower-case words; Chinese runs become character bigrams (forum advice is often Chinese)."""
    out = {w for w in _WORD.findall(text.lower()) if w not in _STOP and len(w) > 1}
    for run in _CJK.findall(text):
        out.update(run[i : i + 2] for i in range(len(run) - 1))
    return out


def lookup(
    kb: KnowledgeBase, text: str, *, verdict: str | None = None, limit: int = 5
) -> list[tuple[float, Claim]]:
    """Claims ranked by word overlap with ``text`` (all claims when ``text`` is empty)."""
    claims = [c for c in kb.claims.values() if verdict is None or c.verdict == verdict]
    query = _words(text)
    if not query:
        return [(1.0, c) for c in claims]
    scored = []
    for claim in claims:
        words = _words(claim.text) | _words(" ".join(claim.keywords))
        if not words:
            continue
        overlap = len(query & words)
        if overlap:
            scored.append((overlap / len(query), claim))
    scored.sort(key=lambda t: (-t[0], t[1].id))
    return scored[:limit]


def render_claims(found: list[tuple[float, Claim]], *, as_json: bool) -> str:
    if as_json:
        rows = [
            {"match": round(s, 3), **c.model_dump(exclude_none=True, by_alias=True)}
            for s, c in found
        ]
        return json.dumps(rows, indent=2, ensure_ascii=False) + "\n"
    if not found:
        return "No claim in the knowledge base matches that advice.\n"
    out = []
    for _, c in found:
        out.append(f"[{c.verdict.upper()}] {c.text}  ({', '.join(c.provenance)})")
        out.append(f"  why: {c.reason.strip()}")
        refs = [r.url for r in c.references] + ([c.experiment] if c.experiment else [])
        if refs:
            out.append(f"  see: {'; '.join(refs)}")
        out.append("")
    return "\n".join(out)

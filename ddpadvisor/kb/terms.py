"""Terms of free text, shared by the lookups over the knowledge base's own words.

English is cut into words (stemmed lightly, dotted names kept whole as well as split) and
Chinese into character bigrams, so that one index serves a tip or a problem description in
either language without a tokenizer. Stop words and the filler bigrams of Chinese forum posts
are dropped: they say nothing about DDP.
"""

from __future__ import annotations

import re
import unicodedata

LATIN = re.compile(r"[a-z0-9_]+(?:\.[a-z0-9_]+)*")
NUMBER = re.compile(r"[0-9]+(?:\.[0-9]+)*")
CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]+")
_STOP_WORDS = (
    "the a an to of and or is in on it be with for your you try that this if by at as "
    "are do does can could should would will may might not no so then than my me i we "
    "our they them what which who how when where why there here some any all its into "
    "from about "
    # auxiliaries, pronouns and generic verbs: a word of this kind used by one account only
    # weighs like a rare technical term, and matches any description that happens to use it
    "was were been being has have had having did done doing get got gets getting also just "
    "very these those he she his her him their us itself themselves like seem seemed seems "
    "look looked looks thing things something anything even don doesn didn isn wasn aren "
    "python "
    # conjunctions that join clauses: they say how a post is built, not what it is about
    "since because whether although though however therefore thus unless until whose whom "
    "either neither while whereas"
)
STOP = frozenset(_STOP_WORDS.split())
# Filler bigrams of Chinese forum posts; they say nothing about the problem or the advice.
_CJK_FILLER = (
    "试试 可以 一下 建议 如果 这个 那个 就是 的话 之前 我们 你们 看看 感觉 "
    "大概 概率 其实 然后 还有 另外 或者 是不 不是 一个 有时 时候 什么 怎么 "
    "这样 那样 因为 所以 应该 需要 已经 还是 也是 我之 也遇 遇到 到过 过类 类似 似的 的情 情况"
)
CJK_STOP = frozenset(_CJK_FILLER.split())


def stem(word: str) -> str:
    """A light English stemmer: synchronised/synchronized/synchronises share one stem."""
    word = re.sub(r"is(e|ed|es|ing|ation|ations)$", r"iz\1", word)
    if word.endswith("ss"):
        return word
    for suffix in ("ations", "ation", "ings", "ing", "ies", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def term_forms(text: str) -> dict[str, str]:
    """Each term of ``text`` with the first word or bigram it was read from (for display)."""
    text = unicodedata.normalize("NFKC", text).lower()
    out: dict[str, str] = {}
    for token in LATIN.findall(text):
        if NUMBER.fullmatch(token):
            out.setdefault(token, token)
            continue
        parts = token.split(".")
        if len(parts) > 1:
            out.setdefault(token, token)
        for p in parts:
            if p not in STOP and (len(p) > 1 or p.isdigit()):
                out.setdefault(stem(p), p)
    for run in CJK.findall(text):
        for i in range(len(run) - 1):
            pair = run[i : i + 2]
            if pair not in CJK_STOP:
                out.setdefault(pair, pair)
    return out


def terms(text: str) -> set[str]:
    """Latin words (stemmed, dotted names kept whole and split) and Chinese bigrams."""
    return set(term_forms(text))


def has_cjk(text: str) -> bool:
    return bool(CJK.search(text))

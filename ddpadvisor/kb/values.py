"""Fact values: parsing typed values from text, and mapping values to the fact's classes.

Every fact is reasoned about as a categorical variable. A bool has classes ``true``/``false``,
an enum its values, a number the intervals its ``bins`` cut, a string the ``classes`` it
declares (first match wins). Links are predicates over these classes.
"""

from __future__ import annotations

import itertools
import math
import re
from typing import Any

from ddpadvisor.kb.patterns import compiled
from ddpadvisor.kb.schema import Fact, Link

Value = bool | int | float | str

UNKNOWN = "unknown"

_TRUE = {"true", "yes", "y", "1", "on", "是", "对", "有", "是的", "对的", "有的", "用了", "开了"}
_FALSE = {"false", "no", "n", "0", "off", "否", "不", "不是", "没有", "无", "没", "没用", "不对"}
# Ways of saying "don't know" (English and Chinese); each means the fact stays unobserved.
UNKNOWN_WORDS = {
    UNKNOWN,
    "",
    "?",
    "dont-know",
    "don't know",
    "dont know",
    "n/a",
    "不知道",
    "不清楚",
    "不确定",
    "未知",
}


class ValueProblem(ValueError):
    """A value that does not fit the fact's declared type."""


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def classes(fact: Fact) -> list[str]:
    if fact.type == "bool":
        return ["true", "false"]
    if fact.type == "enum":
        return list(fact.values or [])
    if fact.type in ("int", "float"):
        edges = fact.bins or []
        if not edges:
            return ["any"]
        out = [f"<{_fmt(edges[0])}"]
        out += [f"{_fmt(a)}..{_fmt(b)}" for a, b in itertools.pairwise(edges)]
        out.append(f">={_fmt(edges[-1])}")
        return out
    labels = [c.label for c in fact.classes or []]
    return labels or ["any"]


def _version_tuple(text: str) -> tuple[int, ...]:
    nums = re.findall(r"\d+", text.split("+")[0])
    return tuple(int(n) for n in nums[:3]) or (0,)


def classify(fact: Fact, value: Value) -> str:
    """The class of an already-typed value."""
    if fact.type == "bool":
        return "true" if value else "false"
    if fact.type == "enum":
        return str(value)
    if fact.type in ("int", "float"):
        labels = classes(fact)
        edges = fact.bins or []
        x = float(value)
        for i, edge in enumerate(edges):
            if x < edge:
                return labels[i]
        return labels[-1]
    text = str(value)
    for cls in fact.classes or []:
        if cls.matches is not None and not compiled(cls.matches).search(text):
            continue
        if cls.version_lt is not None and _version_tuple(text) >= _version_tuple(cls.version_lt):
            continue
        return cls.label
    return classes(fact)[-1]


def parse_value(fact: Fact, raw: Any) -> Value | None:
    """Turn an answer (text from ``--set`` or a YAML/JSON scalar) into a typed value.

    Returns None for ``unknown``/null: an unobserved fact. Raises :class:`ValueProblem`.
    """
    if raw is None:
        return None
    if is_unknown(raw):
        return None
    if isinstance(raw, str):
        _no_surrogates(fact, raw)
        raw = _from_label(fact, raw)
    t = fact.type
    if t == "bool":
        if isinstance(raw, bool):
            return raw
        if isinstance(raw, str) and raw.strip().lower() in _TRUE | _FALSE:
            return raw.strip().lower() in _TRUE
        raise ValueProblem(f"{fact.id} expects true or false, got {raw!r}")
    if t == "enum":
        text = str(raw).strip() if not isinstance(raw, bool) else str(raw).lower()
        if text not in (fact.values or []):
            allowed = " | ".join(fact.values or [])
            raise ValueProblem(f"{fact.id} expects one of {allowed}, got {raw!r}")
        return text
    if t in ("int", "float"):
        return _number(fact, raw)
    if isinstance(raw, (dict, list)):
        raise ValueProblem(f"{fact.id} expects text, got a {type(raw).__name__}")
    text = str(raw)
    if len(text) > MAX_TEXT:
        raise ValueProblem(f"{fact.id}: text of {len(text)} characters (at most {MAX_TEXT})")
    return text


# A version, a GPU name or an algorithm list: longer text is pasted by mistake.
MAX_TEXT = 1000

# Beyond this no count or ratio in a training job makes sense; bigger input is a mistake.
MAX_MAGNITUDE = 1e15


def _number(fact: Fact, raw: Any) -> int | float:
    """An int or float fact's value: finite, of sane size, integral for an int fact."""
    kind = "an integer" if fact.type == "int" else "a number"
    value: int | float | None = None
    if isinstance(raw, bool):
        value = None
    elif isinstance(raw, (int, float)):
        value = raw
    elif isinstance(raw, str) and len(raw) <= 40:
        text = raw.strip()
        try:
            value = int(text) if fact.type == "int" else float(text)
        except ValueError:
            value = None
    if value is None:
        shown = raw if not isinstance(raw, str) or len(raw) <= 40 else raw[:40] + "..."
        raise ValueProblem(f"{fact.id} expects {kind}, got {shown!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueProblem(f"{fact.id} expects a finite number, got {value!r}")
    if abs(value) > MAX_MAGNITUDE:
        shown = (
            f"{value:.3g}"
            if isinstance(value, float)
            else f"an integer of {len(str(abs(value)))} digits"
        )
        raise ValueProblem(f"{fact.id}: {shown} is out of range (|value| <= 1e15)")
    _in_range(fact, value)
    if fact.type == "int":
        if isinstance(value, float):
            if not value.is_integer():
                raise ValueProblem(f"{fact.id} expects an integer, got {raw!r}")
            value = int(value)
        return value
    return float(value)


def _in_range(fact: Fact, value: float) -> None:
    """The fact's declared range (``min``, ``max``, ``exclusive_min``, ``exclusive_max``)."""
    x = float(value)
    if fact.min is not None and x < fact.min:
        raise ValueProblem(f"{fact.id} must be at least {_fmt(fact.min)}, got {value!r}")
    if fact.max is not None and x > fact.max:
        raise ValueProblem(f"{fact.id} must be at most {_fmt(fact.max)}, got {value!r}")
    if fact.exclusive_min is not None and x <= fact.exclusive_min:
        raise ValueProblem(f"{fact.id} must be above {_fmt(fact.exclusive_min)}, got {value!r}")
    if fact.exclusive_max is not None and x >= fact.exclusive_max:
        raise ValueProblem(f"{fact.id} must be below {_fmt(fact.exclusive_max)}, got {value!r}")


_SURROGATE = re.compile("[\ud800-\udfff]")


def _no_surrogates(fact: Fact, text: str) -> None:
    """A lone surrogate (``\\ud800`` in a JSON file, an undecodable byte in an argument) is no
    character: refused where it enters, as no output can carry it."""
    if _SURROGATE.search(text):
        raise ValueProblem(
            f"{fact.id}: the value is not valid text (a lone surrogate or a byte that is not UTF-8)"
        )


def is_unknown(raw: Any) -> bool:
    """Whether an answer means "don't know" (null, ``unknown``, ``不知道`` ...)."""
    return raw is None or (isinstance(raw, str) and raw.strip().lower() in UNKNOWN_WORDS)


def _from_label(fact: Fact, raw: str) -> str:
    """An option label (English or Chinese) turned into the value it stands for."""
    text = raw.strip()
    low = text.lower()
    for value, label in option_labels(fact, "en").items():
        if low == label.strip().lower():
            return value
    for value, label in option_labels(fact, "zh").items():
        if text == label.strip():
            return value
    # A short word that one of the fact's mentions stands for ("震荡", "发散", "blows up").
    if fact.type == "enum":
        for mention in fact.mentions:
            if mention.value is None:
                continue
            for pattern in (*mention.en, *mention.zh):
                if compiled(pattern).fullmatch(text):
                    return str(mention.value)
    return raw


def option_labels(fact: Fact, lang: str = "en") -> dict[str, str]:
    """The label shown for each option value (``true``/``false``, enum values, ``unknown``)."""
    if lang == "zh":
        zh = (fact.zh or {}).get("labels")
        return dict(zh) if isinstance(zh, dict) else {}
    return dict(fact.labels or {})


def option_values(fact: Fact) -> list[str] | None:
    """The options of a question, "don't know" included; None for free input."""
    if fact.type == "bool":
        return ["true", "false", UNKNOWN]
    if fact.type == "enum":
        return [*(fact.values or []), UNKNOWN]
    return None


def condition_holds(fact: Fact, cond: Any, value: Value) -> bool:
    """Whether a typed value satisfies a condition (anything with is_/in_/ge/lt)."""
    if cond.is_ is not None or cond.in_ is not None:
        if fact.type in ("int", "float") and cond.is_ is not None:
            return float(value) == float(cond.is_)
        wanted = [cond.is_] if cond.is_ is not None else list(cond.in_)
        got = classify(fact, value) if fact.type in ("bool", "str") else str(value)
        norm = {("true" if w else "false") if isinstance(w, bool) else str(w) for w in wanted}
        return got in norm or str(value) in norm
    if fact.type not in ("int", "float"):
        return False
    x = float(value)
    if cond.ge is not None and x < cond.ge:
        return False
    return not (cond.lt is not None and x >= cond.lt)


def predicate_classes(fact: Fact, link: Link) -> set[str]:
    """The classes for which the link's predicate holds; raises ValueProblem if ill-formed."""
    labels = classes(fact)
    if link.is_ is not None:
        wanted = [link.is_]
    elif link.in_ is not None:
        wanted = list(link.in_)
    else:
        if fact.type not in ("int", "float"):
            raise ValueProblem(f"'ge'/'lt' need an int or float fact; {fact.id} is {fact.type}")
        edges = fact.bins or []
        for bound in (link.ge, link.lt):
            if bound is not None and bound not in edges:
                raise ValueProblem(
                    f"{fact.id} has no bin edge at {_fmt(bound)}; add it to the fact's 'bins'"
                )
        lows = [float("-inf"), *edges]
        highs = [*edges, float("inf")]
        out = set()
        for label, lo, hi in zip(labels, lows, highs):
            if link.ge is not None and lo < link.ge:
                continue
            if link.lt is not None and hi > link.lt:
                continue
            out.add(label)
        return out
    out = set()
    for w in wanted:
        if fact.type == "bool":
            if not isinstance(w, bool):
                raise ValueProblem(f"{fact.id} is bool; compare with true or false, not {w!r}")
            out.add("true" if w else "false")
        elif fact.type in ("int", "float"):
            raise ValueProblem(f"use 'ge'/'lt' with the bin edges of {fact.id}, not 'is'/'in'")
        else:
            if str(w) not in labels:
                raise ValueProblem(
                    f"{w!r} is not a value of {fact.id} (values: {', '.join(labels)})"
                )
            out.add(str(w))
    return out


def healthy_distribution(fact: Fact) -> dict[str, float]:
    """P(class) in a job with no catalogued fault; unspecified classes share the rest."""
    labels = classes(fact)
    given = {k: v for k, v in (fact.healthy or {}).items() if k in labels}
    rest = [c for c in labels if c not in given]
    remaining = max(0.0, 1.0 - sum(given.values()))
    dist = dict(given)
    for c in rest:
        dist[c] = remaining / len(rest)
    total = sum(dist.values()) or 1.0
    # Keep every class possible: a zero leak would make one observation veto every cause.
    floor = 1e-3
    dist = {c: max(floor, dist[c] / total) for c in labels}
    total = sum(dist.values())
    return {c: dist[c] / total for c in labels}

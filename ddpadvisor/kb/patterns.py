"""Patterns run on user text (descriptions, pasted posts, answered values) in bounded time.

Every pattern a rule gives (bundled or the user's: a fact's ``mentions``, a class's
``matches``) is searched in text nobody vetted, up to a 200,000-character paste. Python's
``re`` backtracks: a pattern as plain as ``(?P<value>\\d+)\\s*GPUs`` searched in 20,000 digits
takes 15 s (every start position scans the whole run again), ``(a|a)*$`` doubles its time with
each character, and ``.*.*.*.*.*=x`` is a polynomial of degree five. So:

- where ``google-re2`` is installed (a dependency), every pattern that RE2 can express runs in
  RE2, whose time is linear in the text whatever the pattern. Python's Unicode classes are kept
  (``\\w``, ``\\d``, ``\\s`` are translated to their Unicode sets; ``\\b`` is RE2's ASCII one);
- a pattern RE2 cannot express (a lookaround) or any pattern without RE2 runs in ``re`` with
  every unbounded repeat capped at :data:`BOUND` characters, so one match attempt costs a
  bounded number of steps;
- :func:`backtracking_problem` refuses, whatever the engine, the shapes whose one attempt is
  itself exponential or a polynomial of high degree (a repeat inside a repeat, an
  alternation under a repeat whose branches can start alike, three unbounded repeats in a row
  that can take the same characters), so ``kb validate`` names them with their file and line.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from functools import cache, lru_cache
from typing import Any, Protocol

try:
    import re._parser as sre  # type: ignore[import-not-found]
except ImportError:  # Python 3.10
    import sre_parse as sre  # type: ignore[no-redef]

try:
    import re2 as _re2  # type: ignore[import-not-found, import-untyped, unused-ignore]
except ImportError:  # the fallback below keeps every search bounded without it
    _re2 = None

BOUND = 64  # characters one unbounded repeat may take in the fallback engine
# Matches of one pattern read from one text: a phrase said 40,000 times (a 1 MB paste of
# "四张卡") cost 90 us a match in the reader; the first few hundred say as much.
MAX_MATCHES = 256
MAX_CHAIN = 3  # unbounded repeats in a row over one run of characters: 64**3 steps an attempt
MAX_LENGTH = 200  # a pattern longer than this is refused

# Python's Unicode classes, spelled for RE2 (whose \w, \d, \s are ASCII only). A word
# character is the letters and digits of the scripts people write here, as ranges: RE2's \p{L}
# costs 2 ms to compile each time it appears, 0.8 s over the bundled patterns.
_WORD = (
    r"\w\x{aa}\x{b5}\x{ba}\x{c0}-\x{d6}\x{d8}-\x{f6}\x{f8}-\x{2ff}\x{370}-\x{1fff}"
    r"\x{3040}-\x{30ff}\x{3400}-\x{4dbf}\x{4e00}-\x{9fff}\x{ac00}-\x{d7af}\x{f900}-\x{faff}"
    r"\x{ff10}-\x{ff19}\x{ff21}-\x{ff3a}\x{ff41}-\x{ff5a}"
)
_DIGIT = r"\p{Nd}"
_SPACE = r"\t-\r\x{1c}-\x{20}\x{85}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}"
_CLASSES = {"w": _WORD, "d": _DIGIT, "s": _SPACE}


class Match(Protocol):
    def start(self, group: int | str = 0) -> int: ...
    def end(self, group: int | str = 0) -> int: ...
    def group(self, group: int | str = 0) -> Any: ...


class Pattern(Protocol):
    groupindex: Any

    def finditer(self, text: str) -> Iterator[Any]: ...
    def search(self, text: str) -> Any: ...
    def fullmatch(self, text: str) -> Any: ...


def _for_re2(pattern: str) -> str:
    """The pattern with Python's Unicode \\w, \\d, \\s (and their negations outside a
    character class) spelled as RE2 Unicode sets; \\Z as RE2's \\z."""
    out: list[str] = []
    i, in_class = 0, False
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            nxt = pattern[i + 1]
            low = nxt.lower()
            if low in _CLASSES and (nxt.islower() or not in_class):
                body = _CLASSES[low]
                if in_class:
                    out.append(body)
                else:
                    out.append(f"[{body}]" if nxt.islower() else f"[^{body}]")
            elif nxt == "Z":
                out.append(r"\z")
            else:
                out.append(pattern[i : i + 2])
            i += 2
            continue
        if ch == "[" and not in_class:
            in_class = True
            out.append(ch)
            i += 1
            if pattern[i : i + 1] == "^":
                out.append("^")
                i += 1
            if pattern[i : i + 1] == "]":  # a "]" first in a class is a literal
                out.append(r"\]")
                i += 1
            continue
        if ch == "]" and in_class:
            in_class = False
        out.append(ch)
        i += 1
    return "".join(out)


def _bounded(pattern: str) -> str:
    """The pattern with ``*``, ``+`` and ``{m,}`` capped at :data:`BOUND` repeats."""
    out: list[str] = []
    i, in_class = 0, False
    quantified = False  # the previous token was a quantifier: a "+" or "?" now modifies it
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            out.append(pattern[i : i + 2])
            i += 2
            quantified = False
            continue
        if in_class:
            if ch == "]":
                in_class = False
            out.append(ch)
            i += 1
            continue
        if ch == "[":
            in_class = True
            out.append(ch)
            i += 1
            for lead in ("^", "]"):
                if pattern[i : i + 1] == lead:
                    out.append(lead)
                    i += 1
            continue
        if ch in "*+" and not quantified:
            out.append(f"{{{0 if ch == '*' else 1},{BOUND}}}")
            quantified = True
            i += 1
            continue
        if ch == "{" and not quantified:
            m = re.match(r"\{(\d*),\}", pattern[i:])
            if m:
                out.append(f"{{{m.group(1) or 0},{max(BOUND, int(m.group(1) or 0))}}}")
                quantified = True
                i += m.end()
                continue
            m = re.match(r"\{\d*(?:,\d*)?\}", pattern[i:])
            if m:
                out.append(m.group(0))
                quantified = True
                i += m.end()
                continue
        quantified = ch == "?" and not quantified and bool(out) and out[-1] not in "(|"
        out.append(ch)
        i += 1
    return "".join(out)


class _Capped:
    """A compiled pattern whose ``finditer`` stops after :data:`MAX_MATCHES` matches."""

    def __init__(self, compiled: Any) -> None:
        self._re = compiled
        self.groupindex = compiled.groupindex

    def finditer(self, text: str) -> Iterator[Any]:
        return itertools.islice(self._re.finditer(text), MAX_MATCHES)

    def search(self, text: str) -> Any:
        return self._re.search(text)

    def fullmatch(self, text: str) -> Any:
        return self._re.fullmatch(text)


class _Bounded(_Capped):
    """``re`` on the bounded form of a pattern that RE2 cannot run."""

    def __init__(self, pattern: str) -> None:
        super().__init__(re.compile(_bounded(pattern), re.IGNORECASE))
        self.pattern = pattern


def _re2_class() -> Any:
    """RE2's compiled-pattern class with its group table computed once (the wrapper rebuilds
    it on every ``group("value")``: a third of the time of a text with many matches)."""
    base = getattr(_re2, "_Regexp", None)
    if base is None:
        return None

    class Cached(base):  # type: ignore[misc, valid-type]
        __slots__ = ("_count", "_index")

        def __init__(self, pattern: str, options: Any) -> None:
            super().__init__(pattern, options)
            self._index = dict(super().groupindex)
            self._count = super().groups

        @property
        def groupindex(self) -> dict[str, int]:
            return self._index

        @property
        def groups(self) -> int:
            return self._count  # type: ignore[no-any-return]

    return Cached


@cache
def compiled(pattern: str) -> Pattern:
    """A KB pattern (searched case-insensitively) ready to run on user text in bounded time."""
    if _re2 is not None:
        options = _re2.Options()
        options.case_sensitive = False
        options.log_errors = False
        options.max_mem = 64 << 20
        try:
            make = _RE2_CLASS or _re2.compile
            return _Capped(make(_for_re2(pattern), options))
        except Exception:  # RE2 cannot express it (a lookaround): the bounded fallback
            pass
    return _Bounded(pattern)


_RE2_CLASS = _re2_class() if _re2 is not None else None


def engine(pattern: str) -> str:
    """Which engine runs the pattern: "re2" (linear) or "re" (bounded repeats)."""
    return "re" if isinstance(compiled(pattern), _Bounded) else "re2"


# ------------------------------------------------------------------ the static backtracking check
_REPEATS = {sre.MAX_REPEAT, sre.MIN_REPEAT, getattr(sre, "POSSESSIVE_REPEAT", None)}
_UNBOUNDED = 100  # a repeat allowing more than this is treated as unbounded
# Characters a class test is tried on: the pattern's own literals are added to these.
_PROBES = "aAzZ09_ \t\n.,;:-/\\'\"()[]{}=+*#@!?<>|&%$^~`\u00e9\u00a0\u56db\u3000\uff18"


def _first_chars(items: Any, probes: str) -> set[str] | None:
    """The probe characters a sequence can start with; None when it can match empty."""
    seen: set[str] = set()
    for op, arg in items:
        chars, empty = _first(op, arg, probes)
        seen |= chars
        if not empty:
            return seen
    return None


def _first(op: Any, arg: Any, probes: str) -> tuple[set[str], bool]:
    """(probe characters the item can start with, whether it can match empty)."""
    if op in _REPEATS:
        lo, _hi, sub = arg
        got = _first_chars(sub, probes)
        return (got if got is not None else _all_first(sub, probes)), lo == 0 or got is None
    if op is sre.SUBPATTERN:
        got = _first_chars(arg[-1], probes)
        return (got if got is not None else _all_first(arg[-1], probes)), got is None
    if op is sre.BRANCH:
        chars: set[str] = set()
        empty = False
        for branch in arg[1]:
            got = _first_chars(branch, probes)
            if got is None:
                empty = True
                chars |= _all_first(branch, probes)
            else:
                chars |= got
        return chars, empty
    if op in (sre.ASSERT, sre.ASSERT_NOT, sre.AT):
        return set(), True
    if op is sre.GROUPREF:
        return set(probes), True
    return {c for c in probes if _takes(op, arg, c)}, False


def _all_first(items: Any, probes: str) -> set[str]:
    seen: set[str] = set()
    for op, arg in items:
        chars, empty = _first(op, arg, probes)
        seen |= chars
        if not empty:
            break
    return seen


def _takes(op: Any, arg: Any, ch: str) -> bool:
    """Whether a one-character item matches ``ch`` (case-insensitively)."""
    cands = {ch, ch.lower(), ch.upper()}
    if op is sre.ANY:
        return ch != "\n"
    if op is sre.LITERAL:
        return any(ord(c) == arg for c in cands) or chr(arg).lower() == ch.lower()
    if op is sre.NOT_LITERAL:
        return chr(arg).lower() != ch.lower()
    if op is sre.IN:
        negate = bool(arg) and arg[0][0] is sre.NEGATE
        hit = any(_in_item(sub_op, sub_arg, cands) for sub_op, sub_arg in arg)
        return hit != negate
    return True  # anything else: assume it may


def _in_item(op: Any, arg: Any, cands: set[str]) -> bool:
    if op is sre.LITERAL:
        return any(ord(c) == arg for c in cands)
    if op is sre.RANGE:
        return any(arg[0] <= ord(c) <= arg[1] for c in cands)
    if op is sre.CATEGORY:
        name = str(arg).lower()
        tests = {
            "digit": str.isdigit,
            "word": lambda c: c.isalnum() or c == "_",
            "space": str.isspace,
        }
        for key, test in tests.items():
            if key in name:
                return any(test(c) for c in cands) != ("not" in name)
    return False


def _chars(op: Any, arg: Any, probes: str) -> set[str]:
    """The probe characters a repeat's body can take anywhere (its first characters and those
    of every item in it)."""
    if op in _REPEATS:
        return set().union(*(_chars(o, a, probes) for o, a in arg[2])) if arg[2] else set()
    if op is sre.SUBPATTERN:
        return set().union(set(), *(_chars(o, a, probes) for o, a in arg[-1]))
    if op is sre.BRANCH:
        return set().union(set(), *(_chars(o, a, probes) for b in arg[1] for o, a in b))
    if op in (sre.ASSERT, sre.ASSERT_NOT, sre.AT):
        return set()
    return {c for c in probes if _takes(op, arg, c)}


def _unbounded(op: Any, arg: Any) -> bool:
    return op in _REPEATS and (arg[1] is sre.MAXREPEAT or arg[1] > _UNBOUNDED)


def _flat(items: Any) -> list[tuple[Any, Any]]:
    """A sequence with its plain groups opened (``(\\d+)\\s*`` is ``\\d+ \\s*``)."""
    out: list[tuple[Any, Any]] = []
    for op, arg in items:
        if op is sre.SUBPATTERN:
            out.extend(_flat(arg[-1]))
        else:
            out.append((op, arg))
    return out


def _problem(items: Any, probes: str, inside: bool, strict: bool = False) -> str | None:
    """The first backtracking shape in a sequence (``inside``: under a repeat)."""
    seq = _flat(items)
    for k, (op, arg) in enumerate(seq):
        if op in _REPEATS:
            _lo, hi, sub = arg
            many = hi is sre.MAXREPEAT or hi > 1
            if many and any(_has_repeat(o, a) for o, a in sub) and (inside or _unbounded(op, arg)):
                return "nested quantifier: a repeat inside a repeat (like (a+)+) can backtrack"
            if many and _ambiguous(sub, probes):
                return "an alternation under a repeat whose branches start alike (like (a|a)*)"
            if why := _problem(sub, probes, inside or many, strict):
                return why
            if _unbounded(op, arg) and _chain(seq[k:], probes, strict) >= MAX_CHAIN:
                return (
                    f"{MAX_CHAIN} or more unbounded repeats in a row can take the same "
                    "characters (like .*.*.*): one attempt is a polynomial in the text"
                )
        elif op is sre.BRANCH:
            for branch in arg[1]:
                if why := _problem(branch, probes, inside, strict):
                    return why
        elif op in (sre.ASSERT, sre.ASSERT_NOT) and (
            why := _problem(arg[1], probes, inside, strict)
        ):
            return why
    return None


def _chain(seq: list[tuple[Any, Any]], probes: str, strict: bool) -> int:
    """How many unbounded repeats, from the first of ``seq`` on, can share one run of
    characters: side by side (``.*.*``), or (``strict``) with optional or overlapping items
    between them (``\\s*(?:x)?\\s*``); every split of the run between them is tried."""
    op, arg = seq[0]
    common = _chars(op, arg, probes)
    count = 1
    for later_op, later_arg in seq[1:]:
        theirs = _chars(later_op, later_arg, probes)
        if _unbounded(later_op, later_arg) and common & theirs:
            count += 1
            common &= theirs
        elif not strict or (
            not (common & theirs) and not _can_be_empty(later_op, later_arg, probes)
        ):
            break
    return count


def _can_be_empty(op: Any, arg: Any, probes: str) -> bool:
    return _first(op, arg, probes)[1]


def _has_repeat(op: Any, arg: Any) -> bool:
    if op in _REPEATS:
        return arg[1] is sre.MAXREPEAT or arg[1] > 1
    if op is sre.SUBPATTERN:
        return any(_has_repeat(o, a) for o, a in arg[-1])
    if op is sre.BRANCH:
        return any(_has_repeat(o, a) for b in arg[1] for o, a in b)
    return False


def _ambiguous(items: Any, probes: str) -> bool:
    """Whether a repeated body holds an alternation two of whose branches can start with the
    same character (then each repetition may take either: 2^n ways to fail)."""
    for op, arg in items:
        if op is sre.SUBPATTERN:
            if _ambiguous(arg[-1], probes):
                return True
        elif op is sre.BRANCH:
            starts = [(_all_first(b, probes), _first_chars(b, probes) is None) for b in arg[1]]
            for i, (a, a_empty) in enumerate(starts):
                if any(a & b or (a_empty and b_empty) for b, b_empty in starts[i + 1 :]):
                    return True
    return False


@lru_cache(maxsize=8192)  # each KB load checks every pattern again; the answer is the pattern's
def backtracking_problem(pattern: str) -> str | None:
    """Why a pattern is refused: too long, invalid, a back-reference, or a shape whose one
    match attempt can backtrack without bound. None when it is fine."""
    if len(pattern) > MAX_LENGTH:
        return f"pattern longer than {MAX_LENGTH} characters"
    try:
        re.compile(pattern)
        parsed = sre.parse(pattern, re.IGNORECASE)
    except (re.error, RecursionError, OverflowError) as exc:
        return f"invalid regular expression: {exc}"
    if re.search(r"\\[1-9]|\(\?P=", pattern):
        return "back-references are not allowed"
    literals = "".join(chr(a) for o, a in _walk(parsed) if o is sre.LITERAL and a < 0x110000)
    # A lookaround runs in the backtracking engine (RE2 has none): there optional items
    # between repeats count too, since each split of a run between them is tried.
    strict = any(op in (sre.ASSERT, sre.ASSERT_NOT) for op, _ in _walk(parsed))
    return _problem(parsed, _PROBES + literals, False, strict)


def _walk(items: Any) -> Iterator[tuple[Any, Any]]:
    for op, arg in items:
        yield op, arg
        if op in _REPEATS:
            yield from _walk(arg[2])
        elif op is sre.SUBPATTERN:
            yield from _walk(arg[-1])
        elif op is sre.BRANCH:
            for branch in arg[1]:
                yield from _walk(branch)
        elif op in (sre.ASSERT, sre.ASSERT_NOT):
            yield from _walk(arg[1])

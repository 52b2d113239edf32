"""Intake: a user's own description or forum post (English or Chinese) turned into facts.

The patterns are knowledge-base data: each fact's ``mentions`` list regular expressions (``en``
and ``zh``) for a value, or with a named group ``value`` that carries it (times a group
``times`` where one is given: "2 nodes x 8 GPUs" is a world size of 16; over a group ``over``:
"the total batch went from 4 to 32" is a ratio of 8, and a learning rate raised by a factor is
read against the batch's growth as linear, square-root or no scaling). User rule folders
extend them like any other fact field, and rule tests with a ``text:`` check them. Every
finding keeps the phrase it came from, so the user can confirm or correct it.

Around the patterns the reading is general: a number is never a card's name ("V100", "3090")
nor a per-card or single-GPU phrase's ("每张卡", "一张卡"); a setting of a compared run ("a run
without accumulation") is not the user's; a negation in the phrase's clause denies a shape ("no
NaNs or spikes") or turns a thing around ("I don't use torch.compile"); a loss shape said of
another quantity (the loss scale, the ranks' weights apart) is not the loss's; and where a post
states several values, the more specific one wins (``PRECEDENCE``).

Code in the text (a fenced block, or a run of lines that parse as Python) is not read by the
patterns: it goes to the static scanner as an excerpt (:func:`ddpadvisor.scan.scan_excerpt`),
which keeps only what a piece of a script can show, and each such finding quotes its line.
"""

from __future__ import annotations

import ast
import bisect
import math
import re
import textwrap
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ddpadvisor.errors import InputError
from ddpadvisor.kb.model import KnowledgeBase
from ddpadvisor.kb.patterns import Pattern, compiled
from ddpadvisor.kb.resemblance import Resemblance, resemble_readings
from ddpadvisor.kb.schema import Fact
from ddpadvisor.kb.values import Value, ValueProblem, parse_value
from ddpadvisor.observation import Gathered, Observation, ObsSource

MAX_TEXT = 200_000  # characters read from a description; a forum post is far shorter

# Counts people write out ("eight A100s", "四张卡") read as numbers when a mention's value group
# captures one.
NUMBER_WORDS = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "twelve": 12, "sixteen": 16, "thirty-two": 32, "sixty-four": 64,
    "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9,
    "十": 10, "十二": 12, "十六": 16,
}  # fmt: skip


# A count read from the prose (per-GPU batch, accumulation, warmup, world size) describes the DDP
# run; the same kind of number said of the single-GPU reference ("on one GPU with 8 images per
# GPU, while on four GPUs with 2") is the other run's setting and is not taken. A single-GPU
# phrase governs what follows it up to the end of the sentence, a contrast ("while", "而") or a
# phrase naming the multi-GPU run; a number also belongs to one that ends its own comma clause.
SINGLE_GPU = re.compile(
    r"\b(?:one|1|a single|single)[- ]?(?:gpu|card|device)\b|单卡|单张卡|一张卡|单\s*GPU|1\s*张卡",
    re.IGNORECASE,
)
MULTI_GPU = re.compile(
    r"\b(?:[2-9]|\d\d+|two|three|four|five|six|seven|eight|multiple|several|many|more)\s*"
    r"(?:x\s*)?(?:gpus|cards|devices|nodes)\b|\b\d+\s*[x×]\s*[a-z]+\d*\b|\bddp\b|multi[- ]?gpu"
    r"|多卡|多机"
    r"|(?:[2-9]|\d\d+|[两二三四五六七八九十]+)\s*(?:张|块)?\s*(?:卡|GPU|显卡)",
    re.IGNORECASE,
)
SENTENCE_END = re.compile(
    r"\.(?!\d)|[;!?。；！？\n]|\b(?:while|whereas|but)\b|，\s*(?:而|但|可是)", re.IGNORECASE
)
COMMA = re.compile(r"[,，]")
# A run the user compares theirs with ("compared with a run without accumulation", "the
# baseline without ..."): a setting said of it, in the same comma clause, is not theirs.
REFERENCE_RUN = re.compile(
    r"\b(?:compared (?:with|to)|in comparison (?:with|to)|relative to|versus|vs\.?|next to"
    r"|as opposed to|unlike"
    r"|(?:the|a|our|my) (?:reference|baseline)(?: run)?|(?:the|a) run (?:without|with no))\b"
    r"|相比|对比|比起|参照|基线",
    re.IGNORECASE,
)

# 和/与/跟 X 相比: the compared run X is wrapped around the phrase
ZH_COMPARED_BEFORE = re.compile(r"(?:和|与|跟)[^，,。；;]{0,30}$")
ZH_COMPARED_AFTER = re.compile(r"[^，,。；;]{0,20}?(?:相比|比起来|对比)")


class _Sentences:
    """Where the text's sentences end, found once per text (a post with many numbers must not
    be rescanned from its start for each one); a sentence is read at most ``SPAN`` characters
    either side of a phrase."""

    SPAN = 300

    def __init__(self, text: str) -> None:
        found = list(SENTENCE_END.finditer(text))
        self.starts = [m.start() for m in found]
        self.ends = [m.end() for m in found]
        self.size = len(text)
        self.parsed: dict[tuple[str, str, str], Value | None] = {}  # see ``_parsed``

    def around(self, start: int, end: int) -> tuple[int, int]:
        i = bisect.bisect_right(self.ends, start) - 1
        lo = self.ends[i] if i >= 0 else 0
        j = bisect.bisect_left(self.starts, end)
        hi = self.starts[j] if j < len(self.starts) else self.size
        return max(lo, start - self.SPAN), min(hi, end + self.SPAN)


def _said_of_single_gpu(text: str, start: int, end: int, sentences: _Sentences) -> bool:
    """Whether the phrase at ``start:end`` states the single-GPU (or another reference) run's
    setting."""
    if MULTI_GPU.search(text, start, end):
        return False  # "on 8 GPUs": the phrase names the multi-GPU run itself
    lo, hi = sentences.around(start, end)
    markers = [m for m in SINGLE_GPU.finditer(text, lo, start)]
    if markers and not MULTI_GPU.search(text, markers[-1].end(), end):
        return True
    commas = [m.end() for m in COMMA.finditer(text, lo, start)]
    if REFERENCE_RUN.search(text, commas[-1] if commas else lo, start):
        return True
    if ZH_COMPARED_BEFORE.search(text, max(lo, start - 30), start) and ZH_COMPARED_AFTER.match(
        text, end
    ):
        return True  # 和不做梯度累积的实验相比: the compared run's setting
    comma = COMMA.search(text, end, hi)
    return bool(SINGLE_GPU.search(text, end, comma.start() if comma else hi))


# A number glued to letters before it is part of a name, never a count ("V100", "M40",
# "GPT4"); a consumer card's number ("3090", "4090 Ti") is a model, never a count of GPUs.
GLUED = re.compile(r"[A-Za-z0-9.]")
CARD_NUMBER = re.compile(r"(?:[1-5]0[5-9]0|16[56]0)")
ONE = frozenset({"1", "一", "one", "a single", "single"})
ONE_CARD = re.compile(
    r"\s*(?:x\s*)?(?:张|块|个)?\s*(?:[\w-]+\s+)?(?:gpu|card|卡|显卡|[AHVLTPK]\d|RTX|MI\d|\d{4})",
    re.IGNORECASE,
)
BY = re.compile(r"\bby\s+$", re.IGNORECASE)
GPU_WORD = re.compile(r"gpu|card|device|卡", re.IGNORECASE)
# "每张卡", "per GPU", "each card": what follows is per card, not a number of cards.
PER_CARD = re.compile(r"(?:每|\b(?:per|each|every)\s+)$", re.IGNORECASE)


def _not_a_count(text: str, m: re.Match[str], raw: str) -> bool:
    """Whether a number a count pattern captured is a model name's, a per-card phrase's, the
    single-GPU reference's ("一张卡") or otherwise not a count of the DDP run."""
    at = m.start(m.re.groupindex["value"])  # RE2 matches take a group number only
    if at > 0 and GLUED.match(text[at - 1]) and raw[:1].isdigit():
        return True
    if any(
        a <= at < b for a, b in (x.span() for x in SINGLE_GPU.finditer(text, m.start(), m.end()))
    ):
        return True  # "一张卡", "1 GPU": the count names the single-GPU reference itself
    if raw.lower() in ONE and ONE_CARD.match(text, m.end(m.re.groupindex["value"])):
        return True  # "一张3090", "one A100": a single card is the reference run
    if BY.search(text[max(0, m.start() - 6) : m.start()]):
        return True  # "seen by two ranks": some of the ranks, not how many there are
    if GPU_WORD.search(m.group(0)):
        if CARD_NUMBER.fullmatch(raw):
            return True
        if PER_CARD.search(text[max(0, m.start() - 8) : m.start()]):
            return True
    return False


# Negation before a phrase, in its own clause and a few words back: "no NaNs or spikes",
# "didn't diverge", "没有 nan", "不用 torch.compile". A clause ends at punctuation, a contrast or
# a subordinate clause ("I don't know why the loss spikes" still says that it spikes).
CLAUSE_END = re.compile(
    r"[.,;:!?()，。；：！？（）\n]|\b(?:but|however|though|although|while|whereas|then|yet|"
    r"why|whether|if|that|which|when|because|since|so|until|after|before|once|and)\b"
    r"|但|但是|可是|不过|而|然后|后来|之后|因为|所以|为什么|是不是|是否",
    re.IGNORECASE,
)
# phrases that hold a negation word but deny nothing that follows
NOT_A_DENIAL = re.compile(
    r"\b(?:no (?:idea|matter|clue|longer)|not (?:sure|only|just|yet)|don['’]t (?:know|understand)"
    r"|(?:do|does|did)n['’]t (?:matter|help))\b",
    re.IGNORECASE,
)
# A cue ("no", "not", "n't", "without", "没有") a few words before the phrase, with no subject
# of a clause of its own between them ("without clipping the loss spikes" says it spikes).
NEGATION_EN = re.compile(
    r"(?:\b(?:no|not|never|without|nor|neither|none|cannot)|n['’]t)\b(?P<gap>(?:\W+\w+){0,3}?)\W*$",
    re.IGNORECASE,
)
NEGATION_ZH = re.compile(
    r"(?:没有|没|未|无|并不|从不|从没|不是|不会|不再|不用|不开|不做|不)\s*"
    r"(?:出现|发生|用|使用|开|加|做|见|有|太)?\s*(?:过|了)?\s*$"
)
# A bool fact is turned around only when the cue denies the thing itself: "no X", "without X",
# "don't use X", "not using X", "没有用 X" ("cannot decrease the loss scale" does not deny a
# loss scale).
DENIES_THING_EN = re.compile(
    r"(?:\b(?:no|not|never|without)|n['’]t)\s+(?:(?:use|using|used|enable|enabled|apply|applied"
    r"|call|called|have|had|do|did|turn on|turned on|add|added)\s+)?(?:any\s+|a\s+|an\s+|the\s+)?$",
    re.IGNORECASE,
)
DENIES_THING_ZH = re.compile(
    r"(?:没有|没|未|不|无)\s*(?:用|使用|开|加|做|调用|开启)?\s*(?:了)?\s*$"
)


NUMBER_DENIED = re.compile(r"(?:\b(?:no|not)|没有|不是)\s*$", re.IGNORECASE)


def _clause_before(text: str, start: int) -> str:
    lo = max(0, start - 60)
    ends = [m.end() for m in CLAUSE_END.finditer(text, lo, start)]
    return NOT_A_DENIAL.sub(" ", text[ends[-1] if ends else lo : start])


def _negated(text: str, start: int) -> bool:
    """Whether a negation governs the phrase starting at ``start`` (its clause, a few words
    back, no subject of its own between)."""
    clause = _clause_before(text, start)
    m = NEGATION_EN.search(clause)
    if m and not any(s.group("loss") for s in SUBJECT.finditer(m.group("gap"))):
        return True
    return bool(NEGATION_ZH.search(clause[-8:]))


def _denies_thing(text: str, start: int) -> bool:
    clause = _clause_before(text, start)
    return bool(DENIES_THING_EN.search(clause) or DENIES_THING_ZH.search(clause[-8:]))


# What a loss shape ("spikes", "does not go down", "diverges") is said of: the nearest noun
# before it in its clause. Said of the loss scale, the learning rate, the speed, or of the
# ranks' weights and gradients (apart from each other), it is not the loss curve's shape.
SHAPE_FACTS = frozenset({"loss_pattern"})
SUBJECT = re.compile(
    r"(?P<other>loss[ _-]?scal\w*|scaler|learning[ _-]rate|\blr\b|throughput|speed|memory"
    r"|utili[sz]ation|grad(?:ient)?s?(?: norm)?|weights|param\w*|replicas?|checkpoints?"
    r"|checksums?|学习率|梯度|权重|参数|显存|速度)"
    r"|(?P<loss>\bloss\b|losses|curve|training|\bit\b|accuracy|\bacc\b|metric|\bap\b|\bmap\b"
    r"|损失|精度|曲线|训练)",
    re.IGNORECASE,
)
APART = re.compile(
    r"^[^.;,，。；]{0,30}?\b(?:across|between|among)\s+(?:the\s+)?(?:ranks|gpus|processes|"
    r"replicas|devices|cards|nodes)|^\s*(?:from each other|apart)\b",
    re.IGNORECASE,
)


def _not_the_loss(text: str, start: int, end: int) -> bool:
    """Whether a loss-shape phrase is said of something other than the loss curve."""
    if APART.search(text[end : end + 40]):
        return True  # "diverge across ranks": the ranks differ, the loss need not do anything
    lo = max(0, start - 50)
    ends = [m.end() for m in CLAUSE_END.finditer(text, lo, start) if m.group(0) != "and"]
    subjects = list(SUBJECT.finditer(text, ends[-1] if ends else lo, start))
    return bool(subjects) and subjects[-1].group("other") is not None


# When one text states several values of a fact that a person picks one of, the more specific
# reading wins: a NaN over a divergence over spikes over oscillation over "stops falling" (an
# oscillating loss also "does not go down"); a shape qualified as occasional ("sometimes
# spikes") yields to one that is not.
PRECEDENCE = {
    "loss_pattern": (
        "nan",
        "resume_jump",
        "diverges",
        "spikes",
        "oscillates",
        "plateau",
        "worse_than_reference",
        "metric_only",
    )
}
OCCASIONAL = re.compile(
    r"(?:\b(?:sometimes|occasionally|at times|now and then|once in a while|rarely)\s+"
    r"(?:\w+\s+)?|偶尔|有时(?:候)?|偶然)\s*$",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Finding:
    """One fact read from the text: its typed value and the phrase that says so."""

    fact: str
    value: Value
    phrase: str
    start: int = 0
    origin: str = "text"  # "text": a phrase of the description; "code": a line of its code


def _compiled(pattern: str) -> Pattern:
    return compiled(pattern)  # RE2 where it serves: linear in the text (ddpadvisor.kb.patterns)


def plain(text: str) -> str:
    """``text`` without lone surrogates: a command-line argument read under a non-UTF-8 locale
    (LC_ALL=POSIX) carries its UTF-8 bytes as surrogate escapes, which are turned back into the
    characters they encode (anything else into U+FFFD), so the pattern engine can read it."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def extract(kb: KnowledgeBase, text: str) -> list[Finding]:
    """The facts ``text`` states, at most one per fact, in the order they appear.

    Where several mentions of one fact match, a phrase inside a longer one of the same fact
    yields to it ("without a DistributedSampler" over "DistributedSampler"); of the rest the
    more specific value wins where the fact ranks its values (``PRECEDENCE``), else the longest
    phrase, on a tie the earlier one. A fact the text's code shows is taken from the code,
    whatever the prose says of it (the code is what ran; the user still confirms it).
    """
    text = plain(text[:MAX_TEXT])
    blocks = code_blocks(text)
    prose = _blank(text, blocks)
    best = _mentioned(kb, prose)
    for found in _scanned(kb, blocks):
        best[found.fact] = found
    return sorted(best.values(), key=lambda f: (f.start, f.fact))


@dataclass(frozen=True)
class _Candidate:
    found: Finding
    end: int
    occasional: bool
    ratio: float | None = None  # a value read as new/old ("lr 1e-4 -> 4e-4"), before mapping
    digits: int = 0  # characters of the numbers the phrase carries

    @property
    def size(self) -> int:
        """How much the phrase says, a number counting as one character: "16 GPUs" is no
        more specific than "8 GPUs" for having two digits."""
        return len(self.found.phrase) - self.digits + min(self.digits, 1)


def _mentioned(kb: KnowledgeBase, text: str) -> dict[str, Finding]:
    candidates: dict[str, list[_Candidate]] = {}
    sentences = _Sentences(text)
    for fact in kb.facts.values():
        for mention in fact.mentions:
            for pattern in (*mention.en, *mention.zh):
                for m in _compiled(pattern).finditer(text):
                    cand = _read(fact, mention.value, text, m, sentences)
                    if cand is not None:
                        candidates.setdefault(fact.id, []).append(cand)
    best: dict[str, Finding] = {}
    for fact_id, cands in candidates.items():
        chosen = _choose(fact_id, [c for c in cands if c.ratio is None])
        if chosen is not None:
            best[fact_id] = chosen.found
    _scalings(kb, candidates, best)
    return best


def _read(
    fact: Fact, given: object, text: str, m: re.Match[str], sentences: _Sentences
) -> _Candidate | None:
    """One match of a mention as a candidate reading, or None when it reads nothing."""
    raw: object = given
    ratio: float | None = None
    groups = m.re.groupindex
    if "value" in groups and m.group("value") is not None:
        raw = m.group("value").strip()
        if fact.type in ("int", "float") or "over" in groups:
            if _not_a_count(text, m, str(raw)):
                return None
            raw = NUMBER_WORDS.get(str(raw).lower(), raw)
            raw = _times(raw, m)
            if "over" in groups and m.group("over") is not None:
                ratio = _over(raw, m.group("over"))
                if ratio is None:
                    return None
                if fact.type != "enum":
                    raw, ratio = ratio, None  # the ratio is the value itself
    if raw is None:
        return None
    phrase = m.group(0).strip()
    start = m.start() + (len(m.group(0)) - len(m.group(0).lstrip()))
    if fact.type == "enum" and ratio is not None:
        value: Value = str(ratio)  # mapped once the reference ratio is known (``_scalings``)
        return _Candidate(Finding(fact.id, value, phrase, start), m.end(), False, ratio)
    parsed = _parsed(fact, raw, sentences.parsed)
    if parsed is None:
        return None
    value = parsed
    if fact.id in SHAPE_FACTS and _not_the_loss(text, m.start(), m.end()):
        return None
    if fact.type in ("int", "float"):
        if "over" not in groups and _said_of_single_gpu(text, m.start(), m.end(), sentences):
            return None  # the single-GPU run's setting, not the DDP run's
        if NUMBER_DENIED.search(text[max(0, start - 6) : start]):
            return None  # "not 8 GPUs": a number denied outright
    elif fact.type == "enum" and _negated(text, start):
        return None  # "no spikes", "didn't diverge": no shape is stated
    elif isinstance(value, bool) and _denies_thing(text, start):
        value = not value  # "I don't use torch.compile"
    occasional = bool(OCCASIONAL.search(text[max(0, start - 30) : start]))
    digits = sum(len(m.group(g) or "") for g in ("value", "times", "over") if g in groups)
    found = Finding(fact.id, value, phrase, start)
    return _Candidate(found, m.end(), occasional, ratio, digits if fact.type != "str" else 0)


def _parsed(
    fact: Fact, raw: object, seen: dict[tuple[str, str, str], Value | None]
) -> Value | None:
    """The typed value, or None; parsed once per fact and raw value in a text (a long post
    repeats them, and reading a label tries each of the fact's mentions)."""
    key = (fact.id, type(raw).__name__, str(raw))
    if key not in seen:
        try:
            seen[key] = parse_value(fact, raw)
        except ValueProblem:
            seen[key] = None
    return seen[key]


def _choose(fact_id: str, cands: list[_Candidate]) -> _Candidate | None:
    """The reading of one fact: phrases inside a longer one yield to it; then an unqualified
    phrase over an occasional one, a plain count over one that opens with 单卡, the more
    specific value, the longest phrase, the earliest."""
    outer = _outermost(cands)
    order = PRECEDENCE.get(fact_id, ())

    def rank(c: _Candidate) -> tuple[int, int, int, int, int]:
        value = str(c.found.value)
        spec = len(order) - order.index(value) if value in order else 0
        # "单卡 batch 32" may be per card or the single-GPU run's: a plain phrase wins over it
        plain = not (isinstance(c.found.value, int | float) and SINGLE_GPU.match(c.found.phrase))
        return (not c.occasional, plain, spec, c.size, -c.found.start)

    return max(outer, key=rank, default=None)


def _outermost(cands: list[_Candidate]) -> list[_Candidate]:
    """The candidates not inside a longer phrase of another (one sweep, not all pairs)."""
    out: list[_Candidate] = []
    reach, reach_span = -1, (-1, -1)  # the furthest end of a phrase starting at or before
    for c in sorted(cands, key=lambda c: (c.found.start, -c.end)):
        span = (c.found.start, c.end)
        if not (reach >= c.end and reach_span != span):
            out.append(c)
        if c.end > reach:
            reach, reach_span = c.end, span
    return out


def _times(raw: object, m: re.Match[str]) -> object:
    """A count times the pattern's ``times`` group, when it has one ("2 nodes x 8 GPUs": the
    world size is 16); the raw text when either is not a number."""
    if "times" not in m.re.groupindex or m.group("times") is None:
        return raw
    other = m.group("times").strip()
    factor = NUMBER_WORDS.get(other.lower(), other)
    try:
        return int(str(raw)) * int(str(factor))
    except ValueError:
        return raw


def _over(raw: object, over: str) -> float | None:
    """The value over the pattern's ``over`` group ("the total batch went from 4 to 32": 8)."""
    try:
        den = float(NUMBER_WORDS.get(over.strip().lower(), over.strip()))
        ratio = float(str(raw)) / den
    except (ValueError, ZeroDivisionError):
        return None
    return ratio if ratio > 0 and math.isfinite(ratio) else None


# A learning rate raised by a factor ("lr 2e-4 -> 4e-4"), read against how much the global
# batch grew: by that factor it was scaled linearly, by its square root as the square root;
# unchanged, not scaled. The growth is the global-batch ratio the text states, else the number
# of GPUs it states (the per-GPU batch kept, as is usual). Any other factor fits no value.
SCALINGS = {"none": lambda r: 1.0, "linear": lambda r: r, "sqrt": math.sqrt}
SCALING_TOLERANCE = 0.15


def _scalings(
    kb: KnowledgeBase, candidates: dict[str, list[_Candidate]], best: dict[str, Finding]
) -> None:
    for fact_id, cands in candidates.items():
        fact = kb.facts[fact_id]
        if fact_id in best or not set(SCALINGS) <= set(fact.values or ()):
            continue
        grown = next(
            (
                float(best[f].value)  # type: ignore[arg-type]
                for f in ("global_batch_ratio", "world_size")
                if f in best and isinstance(best[f].value, int | float)
            ),
            None,
        )
        for c in sorted(cands, key=lambda c: (-c.size, c.found.start)):
            if c.ratio is None or grown is None or grown <= 1:
                continue
            fits = [
                v
                for v, f in SCALINGS.items()
                if abs(c.ratio - f(grown)) <= SCALING_TOLERANCE * f(grown)
            ]
            if len(fits) == 1:
                best[fact_id] = Finding(fact_id, fits[0], c.found.phrase, c.found.start)
                break


# ---------------------------------------------------------------------------- code in the text
# Code is found line by line with string methods, never by a pattern that could backtrack, so
# reading a paste takes time in proportion to its length whatever its shape (a line of 2,000
# spaces, a staircase of indents, a thousand fences that never close).
FENCE_CHARS = "`~"
MIN_FENCE = 3  # ``` or ~~~ at least
# A line that reads as a Python statement rather than prose: a keyword that opens a statement,
# a decorator, an assignment, or a bare call. Prose rarely ends in ")" or ":" after a dotted
# name; a run of such lines is taken as code only when it parses.
STATEMENT_KEYWORDS = frozenset(
    {"for", "while", "with", "if", "elif", "else", "try", "except", "finally", "def", "class"}
    | {"import", "from", "return"}
)
TARGET_CHARS = frozenset(".[]'\", ")  # an assignment's target: these and word characters
CALLEE_CHARS = frozenset(".[]")  # a called name: these and word characters
AUGMENTED = ("//", "-", "+", "*", "/", "@", "%")  # the operator of an augmented assignment
PROMPTS = (">>> ", "... ")
ORPHANS = ("else", "elif", "except", "finally")  # clauses cut from the statement they close
MIN_CODE_LINES = 2  # one line of code in prose is a mention ("I call model.module(x)")
MAX_REPAIRS = 24  # lines dropped from an excerpt that does not parse as pasted
MAX_EXCERPTS = 24  # excerpts of one text given to the scanner (each costs about 2 ms)
MAX_SCANNED = 60_000  # characters of code scanned from one text, all excerpts together


def _word(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def _leading_word(body: str) -> str:
    end = 0
    while end < len(body) and _word(body[end]):
        end += 1
    return body[:end]


def _looks_like_code(line: str) -> bool:
    """Whether one line reads as a Python statement (after its indent, and a ``>>>`` or
    ``...`` prompt if it has one)."""
    body = line.lstrip(" \t")
    return _statement(body) or (body.startswith(PROMPTS) and _statement(body[4:]))


def _statement(body: str) -> bool:
    if not body:
        return False
    if body[0] == "#":
        return True
    if body[0] == "@":
        return len(body) > 1 and (_word(body[1]) or body[1] == ".")
    if _leading_word(body[:9]) in STATEMENT_KEYWORDS:  # the whole word: no keyword is 9 long
        return True
    return _assignment(body) or _call(body)


def _assignment(body: str) -> bool:
    """``target = value``, or an augmented one (``total += loss``); never ``==``."""
    eq = body.find("=")
    if eq <= 0 or body[eq + 1 : eq + 2] == "=":
        return False
    head = body[:eq]
    for op in AUGMENTED:
        if head.endswith(op):
            head = head[: -len(op)]
            break
    head = head.rstrip()
    return bool(head) and all(_word(ch) or ch in TARGET_CHARS for ch in head)


def _call(body: str) -> bool:
    """``name.attr[i](...)`` closing the line, with at most spaces and a comment after it."""
    end = 0
    while end < len(body) and (_word(body[end]) or body[end] in CALLEE_CHARS):
        end += 1
    if end == 0 or body[end : end + 1] != "(":
        return False
    i = end + 1
    while True:
        i = body.find(")", i)
        if i < 0:
            return False
        j = i + 1
        while j < len(body) and body[j] in " \t":
            j += 1
        if j == len(body) or body[j] == "#":
            return True
        i = j  # what was skipped holds no ")"


def _inline(line: str) -> str:
    """A line posted as `inline code` without its backticks (its indent kept)."""
    stripped = line.strip()
    if len(stripped) > 2 and stripped[0] == stripped[-1] == "`" and "`" not in stripped[1:-1]:
        return line[: len(line) - len(line.lstrip())] + stripped[1:-1]
    return line


def _fence(line: str) -> str:
    """The fence a line opens (``` or ~~~ and longer), or ""."""
    body = line.lstrip(" \t")
    ch = body[:1]
    if not ch or ch not in FENCE_CHARS:
        return ""
    n = len(body) - len(body.lstrip(ch))
    return body[:n] if n >= MIN_FENCE else ""


def _fenced(text: str) -> list[tuple[int, int]]:
    """The (start, end) offsets of the code inside each closed fence.

    A fence closes on a later line holding only a run of its character, as long as the
    opening one, else the first shorter run of at least three; a fence that never closes
    opens nothing. Closing lines are indexed once, so unclosed fences cost no rescans.
    """
    lines = text.split("\n")
    offsets = []
    at = 0
    for line in lines:
        offsets.append(at)
        at += len(line) + 1
    closers: dict[tuple[str, int], list[int]] = {}
    for i, line in enumerate(lines):
        body = line.strip(" \t")
        if len(body) >= MIN_FENCE and body[0] in FENCE_CHARS and not body.strip(body[0]):
            closers.setdefault((body[0], len(body)), []).append(i)
    spans: list[tuple[int, int]] = []
    i = 0
    while i < len(lines) - 1:  # an opening line needs the newline after it
        fence = _fence(lines[i])
        close = None
        for n in range(len(fence), MIN_FENCE - 1, -1) if fence else ():
            rows = closers.get((fence[0], n), [])
            k = bisect.bisect_right(rows, i)
            if k < len(rows):
                close = rows[k]
                break
        if close is None:
            i += 1
            continue
        spans.append((offsets[i + 1], offsets[close]))
        i = close + 1
    return spans


@dataclass(frozen=True)
class CodeBlock:
    """A piece of code in the text: where it starts (offset) and its lines as pasted."""

    start: int
    end: int
    code: str


def code_blocks(text: str) -> list[CodeBlock]:
    """Fenced blocks, then unfenced runs of code-like lines, in the order they appear."""
    blocks = [CodeBlock(a, b, text[a:b]) for a, b in _fenced(text)]
    starts = [b.start for b in blocks]

    def fenced(offset: int) -> bool:
        k = bisect.bisect_right(starts, offset) - 1
        return k >= 0 and offset < blocks[k].end

    found: list[CodeBlock] = []
    run: list[tuple[int, str]] = []
    offset = 0

    def close() -> None:
        if len(run) >= MIN_CODE_LINES and _repair("\n".join(t for _, t in run)) is not None:
            start = run[0][0]
            end = run[-1][0] + len(run[-1][1])
            if not fenced(start):
                found.append(CodeBlock(start, end, text[start:end]))
        run.clear()

    for line in text.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        inside = fenced(offset)
        looks = not inside and _looks_like_code(_inline(body))
        if not inside and body.strip() and (looks or (run and body[:1] in " \t")):
            run.append((offset, body))
        elif not body.strip() and run:
            pass  # a blank line inside a block of code
        else:
            close()
        offset += len(line)
    close()
    return sorted([*blocks, *found], key=lambda b: b.start)


def _blank(text: str, blocks: list[CodeBlock]) -> str:
    """The text with its code replaced by spaces (offsets kept), for the prose patterns."""
    chars = list(text)
    for b in blocks:
        for i in range(b.start, b.end):
            if chars[i] != "\n":
                chars[i] = " "
    return "".join(chars)


def _orphan(line: str) -> bool:
    """Whether a line is a clause cut from its statement: ``else:``, ``elif x:``,
    ``except E:``, ``finally:`` (a comment may follow)."""
    body = line.strip()
    word = _leading_word(body)
    if word not in ORPHANS:
        return False
    i = len(word)
    while True:
        i = body.find(":", i)
        if i < 0:
            return False
        rest = body[i + 1 :].lstrip()
        if not rest or rest[0] == "#":
            return word in ("elif", "except") or not body[len(word) : i].strip()
        i += 1


def _repair(code: str) -> str | None:
    """The excerpt as Python that parses, line for line (line N is still the pasted line N):
    prompts and wrapping backticks stripped, dedented; a block header with no body given
    ``pass``; a clause cut from its statement (``else:``) read as an ``if`` on a condition not
    shown; a line indented
    deeper than the code before it (a pasted part of a block) shifted back; and a line that
    still breaks the parse (output, the poster's ellipsis) turned into ``pass``. None when it
    still does not parse."""
    lines = [re.sub(r"^(\s*)(?:>>> |\.\.\. )", r"\1", ln) for ln in code.splitlines()]
    lines = [_inline(ln) for ln in lines]
    rows = textwrap.dedent("\n".join(lines)).splitlines()
    if not rows:
        return None
    for _ in range(MAX_REPAIRS):
        text = "\n".join(rows)
        try:
            ast.parse(text)
            return text
        except SyntaxError as exc:
            bad = min(max((exc.lineno or len(rows)) - 1, 0), len(rows) - 1)
            msg = exc.msg or ""
            if "indented block" in msg:
                header = (
                    bad if bad == len(rows) - 1 and rows[bad].rstrip().endswith(":") else bad - 1
                )
                while header > 0 and not rows[header].strip():
                    header -= 1
                if rows[header].rstrip().endswith(":"):
                    rows[header] = rows[header].rstrip() + " pass"
                    continue
            if _orphan(rows[bad]):
                # its condition is not in the excerpt: a name the scan cannot decide
                rows[bad] = " " * _indent(rows[bad]) + "if condition_not_shown:"
                continue
            if "unexpected indent" in msg:
                prev = next((r for r in reversed(rows[:bad]) if r.strip()), "")
                by = _indent(rows[bad]) - _indent(prev)
                if by <= 0:  # the line before ends a call spread over lines: back to the margin
                    by = _indent(rows[bad]) - _indent(next(r for r in rows if r.strip()))
                if by > 0:
                    start = _indent(rows[bad])
                    j = bad
                    while j < len(rows) and (not rows[j].strip() or _indent(rows[j]) >= start):
                        rows[j] = rows[j][by:] if rows[j].strip() else rows[j]
                        j += 1
                    continue
            rows[bad] = " " * _indent(rows[bad]) + "pass"
        except (ValueError, RecursionError, MemoryError):
            return None
    return None


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _scanned(kb: KnowledgeBase, blocks: list[CodeBlock]) -> list[Finding]:
    """Facts the scanner reads from the text's code, each quoting the line that shows it."""
    from ddpadvisor.scan import scan_excerpt

    out: list[Finding] = []
    budget = MAX_SCANNED
    for n, block in enumerate(blocks[:MAX_EXCERPTS], 1):
        budget -= len(block.code)
        if budget < 0:
            break  # a post is a few excerpts; past this the paste is a dump, not a question
        code = _repair(block.code)
        if code is None:
            continue
        try:
            result = scan_excerpt(code, f"excerpt{n}")
        except InputError:
            continue
        pasted = block.code.splitlines(keepends=True)
        for item in result.findings:
            fact = kb.facts.get(item.fact)
            if fact is None:
                continue
            try:
                value = parse_value(fact, item.value)
            except ValueProblem:
                continue
            if value is None:
                continue
            line = int(item.where.rpartition(":")[2] or 0)
            phrase = pasted[line - 1].strip() if 0 < line <= len(pasted) else item.detail
            start = block.start + sum(len(r) for r in pasted[: max(0, line - 1)])
            out.append(Finding(fact.id, value, phrase, start, "code"))
    return out


def to_observations(
    findings: list[Finding], where: str, source: ObsSource = "description"
) -> list[Observation]:
    """Findings as observations: proposals (source ``description``) until the user confirms
    them, which turns them into answers."""
    return [
        Observation(
            fact=f.fact,
            value=f.value,
            source=source,
            where=where,
            detail=(
                f"from the code in the description: \u201c{f.phrase}\u201d"
                if f.origin == "code"
                else f"from the description: \u201c{f.phrase}\u201d"
            ),
        )
        for f in findings
    ]


def read_text(path: Path) -> str:
    """A description file's text: a regular file of bounded size that says something (a FIFO,
    a device or an empty file is one line, exit 2), cut to what the intake reads."""
    from ddpadvisor.yamlio import read_description_text

    return read_description_text(path)[:MAX_TEXT]


def described(kb: KnowledgeBase, texts: Iterable[str]) -> list[Resemblance]:
    """The causes a description reads like, read twice: as pasted, and as its prose with the
    code blanked out. A long excerpt's identifiers otherwise drown the user's own words; the
    identifiers an account names (``lr_scheduler.step``, ``model.module``) still count in the
    first reading. Each cause counts at the stronger of the two."""
    whole = plain("\n\n".join(t for t in texts if t.strip())[:MAX_TEXT])
    prose = _blank(whole, code_blocks(whole))
    return resemble_readings(kb, [whole] if prose == whole else [whole, prose])


def read_description(kb: KnowledgeBase, path: Path) -> Gathered:
    """Observations from a description file (``--describe FILE``), and the causes it reads
    like."""
    text = read_text(path)
    found = extract(kb, text)
    return Gathered(to_observations(found, path.name), resemblance=described(kb, [text]))

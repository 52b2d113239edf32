"""Intake: a user's own description or forum post (English or Chinese) turned into facts.

The patterns are knowledge-base data: each fact's ``mentions`` list regular expressions (``en``
and ``zh``) for a value, or with a named group ``value`` that carries it (times a group
``times`` where one is given: "2 nodes x 8 GPUs" is a world size of 16). User rule folders
extend them like any other fact field, and rule tests with a ``text:`` check them. Every
finding keeps the phrase it came from, so the user can confirm or correct it.

Code in the text (a fenced block, or a run of lines that parse as Python) is not read by the
patterns: it goes to the static scanner as an excerpt (:func:`ddpadvisor.scan.scan_excerpt`),
which keeps only what a piece of a script can show, and each such finding quotes its line.
"""

from __future__ import annotations

import ast
import bisect
import re
import textwrap
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ddpadvisor.errors import InputError
from ddpadvisor.kb.model import KnowledgeBase
from ddpadvisor.kb.patterns import Pattern, compiled
from ddpadvisor.kb.resemblance import Resemblance, resemble_readings
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
    r"|[两二三四五六七八九十\d]+\s*(?:张|块)\s*(?:卡|GPU|显卡)",
    re.IGNORECASE,
)
SENTENCE_END = re.compile(
    r"\.(?!\d)|[;!?。；！？\n]|\b(?:while|whereas|but)\b|，\s*(?:而|但|可是)", re.IGNORECASE
)
COMMA = re.compile(r"[,，]")


def _said_of_single_gpu(text: str, start: int, end: int) -> bool:
    """Whether the phrase at ``start:end`` states the single-GPU run's setting."""
    if MULTI_GPU.search(text, start, end):
        return False  # "on 8 GPUs": the phrase names the multi-GPU run itself
    opened = [m.end() for m in SENTENCE_END.finditer(text, 0, start)]
    closed = SENTENCE_END.search(text, end)
    lo, hi = (opened[-1] if opened else 0), (closed.start() if closed else len(text))
    markers = [m for m in SINGLE_GPU.finditer(text, lo, start)]
    if markers and not MULTI_GPU.search(text, markers[-1].end(), end):
        return True
    comma = COMMA.search(text, end, hi)
    return bool(SINGLE_GPU.search(text, end, comma.start() if comma else hi))


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


def extract(kb: KnowledgeBase, text: str) -> list[Finding]:
    """The facts ``text`` states, at most one per fact, in the order they appear.

    Where several mentions of one fact match, the longest phrase wins ("without a
    DistributedSampler" over "DistributedSampler"); on a tie the earlier one. A fact the
    text's code shows is taken from the code, whatever the prose says of it (the code is what
    ran; the user still confirms it).
    """
    text = text[:MAX_TEXT]
    blocks = code_blocks(text)
    prose = _blank(text, blocks)
    best = _mentioned(kb, prose)
    for found in _scanned(kb, blocks):
        best[found.fact] = found
    return sorted(best.values(), key=lambda f: (f.start, f.fact))


def _mentioned(kb: KnowledgeBase, text: str) -> dict[str, Finding]:
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
                            raw = _times(raw, m)
                    if raw is None:
                        continue
                    try:
                        value = parse_value(fact, raw)
                    except ValueProblem:
                        continue
                    if value is None:
                        continue
                    if fact.type in ("int", "float") and _said_of_single_gpu(
                        text, m.start(), m.end()
                    ):
                        continue  # the single-GPU run's setting, not the DDP run's
                    found = Finding(fact.id, value, m.group(0).strip(), m.start())
                    cur = best.get(fact.id)
                    if cur is None or (len(found.phrase), -found.start) > (
                        len(cur.phrase),
                        -cur.start,
                    ):
                        best[fact.id] = found
    return best


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


def to_observations(findings: list[Finding], where: str) -> list[Observation]:
    return [
        Observation(
            fact=f.fact,
            value=f.value,
            source="answer",
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
    try:
        return path.read_text(encoding="utf-8", errors="replace")[:MAX_TEXT]
    except FileNotFoundError:
        raise InputError("no such file", path) from None
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", path) from None


def described(kb: KnowledgeBase, texts: Iterable[str]) -> list[Resemblance]:
    """The causes a description reads like, read twice: as pasted, and as its prose with the
    code blanked out. A long excerpt's identifiers otherwise drown the user's own words; the
    identifiers an account names (``lr_scheduler.step``, ``model.module``) still count in the
    first reading. Each cause counts at the stronger of the two."""
    whole = "\n\n".join(t for t in texts if t.strip())[:MAX_TEXT]
    prose = _blank(whole, code_blocks(whole))
    return resemble_readings(kb, [whole] if prose == whole else [whole, prose])


def read_description(kb: KnowledgeBase, path: Path) -> Gathered:
    """Observations from a description file (``--describe FILE``), and the causes it reads
    like."""
    text = read_text(path)
    found = extract(kb, text)
    return Gathered(to_observations(found, path.name), resemblance=described(kb, [text]))

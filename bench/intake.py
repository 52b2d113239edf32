"""The intake bench: how well a person's own words are read as facts, per fact and overall.

Each phrase in ``bench/intake_phrases.yaml`` lists every fact it states (``yields``) and the
near misses it must not be read as (``not``: ``fact`` never read, ``fact=value`` never read with
that value). A fact read with the stated value is a true positive; a stated fact not read, or
read with another value, a miss; a fact read that the phrase does not state, or with a wrong
value, a false positive. Precision and recall are printed per fact and overall, for the tuned
phrases and, beside them, the held-out ones (``split: heldout``, fixed before any pattern was
tuned). ``--verbose`` lists the tuned phrases read wrong; held-out phrases are never listed;
``--tuned-only`` leaves the held-out figures out altogether, for use while tuning.

``--long`` also times reading a long post at two lengths (the growth should be linear).

    python bench/intake.py [--phrases FILE] [--limit N] [--verbose] [--tuned-only] [--long]

It prints figures and exits 0 (a malformed phrase file: one line, exit 2).
"""

from __future__ import annotations

import argparse
import math
import re
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ddpadvisor.evidence.intake import extract  # noqa: E402
from ddpadvisor.kb.model import KnowledgeBase  # noqa: E402
from ddpadvisor.service import load_engine  # noqa: E402

SPLITS = ("tuned", "heldout")
# Words around a GPU model that name the same card ("Tesla V100", "RTX 3090", "V100").
MODEL_NOISE = re.compile(r"\b(?:tesla|nvidia|geforce|rtx|gtx|amd|instinct)\b|\s+", re.I)


@dataclass
class Phrase:
    text: str
    yields: dict[str, object]
    not_: list[tuple[str, object | None]]
    split: str
    line: int


@dataclass
class Tally:
    tp: Counter[str] = field(default_factory=Counter)
    fn: Counter[str] = field(default_factory=Counter)
    fp: Counter[str] = field(default_factory=Counter)
    near: int = 0  # near misses read (counted among the false positives too)
    phrases: int = 0
    right: int = 0
    seconds: float = 0.0


class BadFile(Exception):
    pass


def load(path: Path, kb: KnowledgeBase) -> list[Phrase]:
    try:
        doc = yaml.compose(path.read_text(encoding="utf-8"))
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise BadFile(f"{path}: cannot read: {exc}".splitlines()[0]) from None
    if not isinstance(data, dict) or not isinstance(data.get("phrases"), list):
        raise BadFile(f"{path}: expected a mapping with a 'phrases' list")
    nodes = doc.value[0][1].value if doc is not None else []
    out: list[Phrase] = []
    for i, item in enumerate(data["phrases"]):
        line = nodes[i].start_mark.line + 1 if i < len(nodes) else 0
        where = f"{path}:{line}"
        if not isinstance(item, dict) or not isinstance(item.get("text"), str):
            raise BadFile(f"{where}: a phrase needs a 'text' string")
        yields = item.get("yields") or {}
        if not isinstance(yields, dict):
            raise BadFile(f"{where}: 'yields' must be a mapping of fact to value")
        for fact in yields:
            if fact not in kb.facts:
                raise BadFile(f"{where}: unknown fact {fact!r}")
        nots: list[tuple[str, object | None]] = []
        for entry in item.get("not") or []:
            fact, eq, value = str(entry).partition("=")
            if fact not in kb.facts:
                raise BadFile(f"{where}: 'not' names unknown fact {fact!r}")
            nots.append((fact, yaml.safe_load(value) if eq else None))
        split = item.get("split", "tuned")
        if split not in SPLITS:
            raise BadFile(f"{where}: split must be one of {', '.join(SPLITS)}")
        out.append(Phrase(item["text"], yields, nots, split, line))
    return out


def same(expected: object, read: object) -> bool:
    if isinstance(expected, bool) or isinstance(read, bool):
        return expected is read
    if isinstance(expected, int | float) and isinstance(read, int | float):
        return math.isclose(float(expected), float(read), rel_tol=1e-6)
    return MODEL_NOISE.sub("", str(expected)).lower() == MODEL_NOISE.sub("", str(read)).lower()


def score(kb: KnowledgeBase, phrase: Phrase, tally: Tally) -> list[str]:
    """Add one phrase to the tally; what it read wrong, one line each."""
    start = time.perf_counter()
    read = {f.fact: f.value for f in extract(kb, phrase.text)}
    tally.seconds += time.perf_counter() - start
    wrong: list[str] = []
    for fact, value in phrase.yields.items():
        if fact in read and same(value, read[fact]):
            tally.tp[fact] += 1
            continue
        tally.fn[fact] += 1
        if fact in read:
            tally.fp[fact] += 1
            wrong.append(f"{fact}: read {read[fact]!r}, stated {value!r}")
        else:
            wrong.append(f"{fact}: missed ({value!r})")
    for fact, value in read.items():
        if fact not in phrase.yields:
            tally.fp[fact] += 1
            wrong.append(f"{fact}: read {value!r}, not stated")
    for fact, value in phrase.not_:
        if fact in read and (value is None or same(value, read[fact])):
            tally.near += 1
            wrong.append(f"{fact}: near miss read ({read[fact]!r})")
    tally.phrases += 1
    tally.right += not wrong
    return wrong


def _ratio(a: int, b: int) -> str:
    return f"{a / b:5.2f} ({a}/{b})" if b else "   - (0/0)"


def report(tallies: dict[str, Tally], splits: tuple[str, ...]) -> None:
    shown = [tallies[s] for s in splits]
    facts = sorted(set().union(*(set(t.tp) | set(t.fn) | set(t.fp) for t in shown)))
    cols = "".join(f"  {s + ' precision':>18} {s + ' recall':>15}" for s in splits)
    print(f"{'fact':34}{cols}")
    for fact in facts:
        row = ""
        for s in splits:
            t = tallies[s]
            tp = t.tp[fact]
            row += f"  {_ratio(tp, tp + t.fp[fact]):>18} {_ratio(tp, tp + t.fn[fact]):>15}"
        print(f"{fact:34}{row}")
    print()
    for s in splits:
        t = tallies[s]
        tp, fp, fn = sum(t.tp.values()), sum(t.fp.values()), sum(t.fn.values())
        per = 1000 * t.seconds / t.phrases if t.phrases else 0.0
        print(
            f"{s:8} {t.phrases} phrases: precision {_ratio(tp, tp + fp).strip()}, recall "
            f"{_ratio(tp, tp + fn).strip()}; read right {t.right}/{t.phrases}; near misses read "
            f"{t.near}; {per:.1f} ms per phrase"
        )


# A post of repeated count phrases and shapes: every repeat is a candidate to weigh, so a
# reading that rescans the text per candidate grows with the square of its length.
LONG_UNIT = (
    "4 GPUs, batch 2 per card, the loss spikes and no nan. 每张卡 batch 2，4 张卡，loss 震荡。"
)


def long_posts(kb: KnowledgeBase) -> None:
    """CPU time to read a long post at two lengths; linear reading grows about 4x."""
    extract(kb, LONG_UNIT)
    times = []
    for repeats in (300, 1200):
        text = LONG_UNIT * repeats
        start = time.process_time()
        extract(kb, text)
        times.append(time.process_time() - start)
        print(f"long post {len(text):7} characters: {times[-1]:.2f} s CPU")
    print(f"growth for 4x the length: {times[1] / max(times[0], 1e-9):.1f}x (linear: about 4x)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--phrases", type=Path, default=ROOT / "bench" / "intake_phrases.yaml")
    parser.add_argument("--limit", type=int, default=0, help="only the first N phrases")
    parser.add_argument("--verbose", action="store_true", help="list tuned phrases read wrong")
    parser.add_argument(
        "--long", action="store_true", help="also time reading long posts (linear growth)"
    )
    parser.add_argument(
        "--tuned-only", action="store_true", help="leave the held-out figures out (while tuning)"
    )
    args = parser.parse_args(argv)
    kb = load_engine().kb
    try:
        phrases = load(args.phrases, kb)
    except BadFile as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.limit:
        phrases = phrases[: args.limit]
    tallies = {s: Tally() for s in SPLITS}
    for phrase in phrases:
        wrong = score(kb, phrase, tallies[phrase.split])
        if args.verbose and wrong and phrase.split == "tuned":
            print(f"line {phrase.line}: {phrase.text!a}")
            for w in wrong:
                print(f"    {w}")
    if args.verbose:
        print()
    report(tallies, SPLITS[:1] if args.tuned_only else SPLITS)
    if args.long:
        print()
        long_posts(kb)
    return 0


if __name__ == "__main__":
    sys.exit(main())

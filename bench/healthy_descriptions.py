"""How often a description of a job that was fine gets a confident fault.

Each entry of ``bench/healthy_corpus.yaml`` is a real public thread (URL cited) in which a
multi-GPU training run looked suspicious to its owner and the resolution was that nothing was
wrong with the training: expected noise, a misunderstanding, a setup confirmed, a speed-only
question. ``text`` is the owner's account in our own words, as they would paste it into
``ddpadvisor ask``; the resolution is not in it.

For each text the tool reads it as ``ask`` does (facts from its phrases, and the causes it reads
like) and ranks the causes. A *confident fault* is a lead at >= 0.30 that says the training
itself is worse: not the catch-all, not ``expected-early-noise`` and not a measurement cause
(a misleading curve leaves the training fine). The split is fixed by position: every third
entry is held out; never tune on it.

    python bench/healthy_descriptions.py [--corpus FILE] [--verbose]

``--verbose`` lists the tuned entries only. Exit 2 on a malformed corpus file.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from ddpadvisor.engine.diagnose import Engine  # noqa: E402
from ddpadvisor.evidence.intake import described, extract, to_observations  # noqa: E402
from ddpadvisor.report.present import diagnose  # noqa: E402
from ddpadvisor.service import load_engine  # noqa: E402

CORPUS = REPO / "bench" / "healthy_corpus.yaml"
CONFIDENT = 0.30
BENIGN = {"other", "expected-early-noise"}  # leads that say the training is fine


@dataclass(frozen=True)
class Entry:
    number: int  # 1-based position in the file; every third is held out
    url: str
    text: str
    kind: str

    @property
    def split(self) -> str:
        return "heldout" if self.number % 3 == 0 else "tuned"


def load(path: Path) -> list[Entry]:
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ValueError(f"{path}: {exc}") from None
    if not isinstance(raw, list):
        raise ValueError(f"{path}: expected a list of entries")
    out = []
    for n, item in enumerate(raw, start=1):
        if not isinstance(item, dict) or not all(
            isinstance(item.get(k), str) and item[k].strip() for k in ("url", "text", "kind")
        ):
            raise ValueError(f"{path}: entry {n}: needs url, text and kind as strings")
        out.append(Entry(n, item["url"], item["text"], item["kind"]))
    return out


def lead(engine: Engine, text: str) -> tuple[str, float]:
    """The top cause and its score for ``text`` read as ``ask`` reads it."""
    found = extract(engine.kb, text)
    diagnosis = diagnose(
        engine, to_observations(found, "description"), resemblance=described(engine.kb, [text])
    )
    top = diagnosis.causes[0]
    return top.id, top.score


def is_confident_fault(engine: Engine, cause: str, score: float) -> bool:
    if cause in BENIGN or score < CONFIDENT:
        return False
    return engine.kb.causes[cause].area != "measurement"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--verbose", action="store_true", help="list the tuned entries")
    args = parser.parse_args(argv)
    try:
        entries = load(args.corpus)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    engine = load_engine()
    faults: dict[str, Counter[str]] = {"tuned": Counter(), "heldout": Counter()}
    sizes: Counter[str] = Counter()
    for entry in entries:
        cause, score = lead(engine, entry.text)
        bad = is_confident_fault(engine, cause, score)
        sizes[entry.split] += 1
        if bad:
            faults[entry.split][cause] += 1
        if args.verbose and entry.split == "tuned":
            mark = "  <-- confident fault" if bad else ""
            print(f"{entry.number:3} {entry.kind:18} {cause:38} {score:.2f}{mark}")
    print(f"healthy descriptions: {len(entries)} real threads ({args.corpus.name})")
    for split in ("tuned", "heldout"):
        n = sum(faults[split].values())
        which = ", ".join(f"{c} {k}" for c, k in faults[split].most_common()) or "-"
        print(f"  {split:8} led by a confident fault (>= {CONFIDENT:.2f}): {n} of {sizes[split]}")
        if split == "tuned":
            print(f"           which: {which}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

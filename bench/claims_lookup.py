"""How well `ddpadvisor claims` finds the claim a pasted forum tip is about.

Prints top-1 / top-3 for the tuned paraphrases, the held-out paraphrases (never tuned on) and
every seed paragraph that claims cite (a paragraph counts as found when a claim citing it is
ranked there), plus the scores of nonsense and unrelated queries against the threshold.
The seed threads are read from shared/seeds (never by the installed tool).

    python bench/claims_lookup.py [--seeds DIR] [--verbose]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from ddpadvisor.kb.claims import THRESHOLD, index_for, lookup  # noqa: E402
from ddpadvisor.kb.load import load_kb  # noqa: E402
from ddpadvisor.kb.model import KnowledgeBase  # noqa: E402
from tests.claims_queries import HELD_OUT, NONSENSE, TUNED, UNRELATED  # noqa: E402

SEED_CANDIDATES = (REPO.parent / "shared" / "seeds", REPO.parent.parent / "shared" / "seeds")


def seed_paragraphs(seeds: Path) -> dict[str, str]:
    """'000:N' -> paragraph text (paragraph 0, the title, left out)."""
    out = {}
    for path in sorted(seeds.glob("*.txt")):
        lines = [ln for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]
        for n, line in enumerate(lines[1:], start=1):
            out[f"{path.name[:3]}:{n}"] = line
    return out


def rank_of(kb: KnowledgeBase, query: str, hit: object) -> int | None:
    """1-based rank of the first claim ``hit(claim)`` accepts among the shown rows."""
    for i, (_, claim) in enumerate(lookup(kb, query, limit=len(kb.claims)), start=1):
        if hit(claim):  # type: ignore[operator]
            return i
    return None


def report(name: str, ranks: list[int | None]) -> None:
    n = len(ranks)
    top1 = sum(r == 1 for r in ranks)
    top3 = sum(r is not None and r <= 3 for r in ranks)
    print(
        f"{name:<22} n={n:<3} top-1 {top1}/{n} ({top1 / n:.0%})  top-3 {top3}/{n} ({top3 / n:.0%})"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=Path)
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    kb = load_kb([REPO / "kb"])
    index = index_for(kb)

    for name, pairs in (("tuned paraphrases", TUNED), ("held-out paraphrases", HELD_OUT)):
        ranks = []
        for query, want in pairs:
            r = rank_of(kb, query, lambda c, w=want: c.id == w)
            ranks.append(r)
            # Held-out misses are never printed: they must not steer the tuning.
            if args.verbose and r != 1 and pairs is TUNED:
                top = [(round(m.score, 2), m.claim.id) for m in index.search(query)[:3]]
                print(f"  rank {r}: {want} <- {query}\n    top: {top}")
        report(name, ranks)

    seeds = args.seeds or next((p for p in SEED_CANDIDATES if p.is_dir()), None)
    if seeds is None:
        print("seed paragraphs: shared/seeds not found (pass --seeds DIR)")
    else:
        cited = {p for c in kb.claims.values() for p in c.provenance}
        ranks = []
        for pid, text in seed_paragraphs(seeds).items():
            if pid not in cited:
                continue
            r = rank_of(kb, text, lambda c, p=pid: p in c.provenance)
            ranks.append(r)
            if args.verbose and (r is None or r > 1):
                top = [(round(m.score, 2), m.claim.id) for m in index.search(text)[:3]]
                print(f"  rank {r}: {pid}  top: {top}")
        report("seed paragraphs", ranks)

    print(f"threshold {THRESHOLD:.2f}")
    for query in NONSENSE + [q for q, _ in UNRELATED]:
        best = next(iter(index.search(query)), None)
        shown = f"{best.score:.2f} {best.claim.id}" if best else "0.00"
        print(f"  best {shown:<48} <- {query}")
    for name, pairs in (("tuned", TUNED), ("held-out", HELD_OUT)):
        lows = []
        for query, want in pairs:
            found = [m for m in index.search(query) if m.claim.id == want]
            lows.append(found[0].score if found else 0.0)
        print(f"  lowest score of a {name} paraphrase's own claim: {min(lows):.2f}")


if __name__ == "__main__":
    main()

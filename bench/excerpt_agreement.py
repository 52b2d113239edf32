"""How far an excerpt of a script can be trusted: excerpts cut from whole scripts, scanned as a
forum post's code would be, against the scan of the whole script.

For every script given (default: the trace zoo, the scan fixtures and the framework zoo), the
whole file is scanned; then windows of 8, 16 and 32 lines are cut around each ``backward(``,
``DataLoader(`` and ``DistributedDataParallel(``/``DDP(`` line, indented as the script had
them, and scanned with :func:`ddpadvisor.scan.scan_excerpt`. Each excerpt finding is
*agreeing* (same value as the whole scan), *contradicting* (the whole scan decided another
value) or *extra* (the whole scan left the fact unknown). A contradiction is what would mislead
a user: the figure to keep near zero.

    python bench/excerpt_agreement.py [SCRIPT_OR_FOLDER ...] [--show N]

Prints figures; exit 0 (a path that does not exist: one line, exit 2).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

REPO = Path(__file__).resolve().parent.parent
DEFAULT = [REPO / "tests" / "zoo", REPO / "tests" / "scan_fixtures", REPO / "tests" / "frameworks"]
ANCHOR = re.compile(r"\.backward\(|DataLoader\(|DistributedDataParallel\(|\bDDP\(")
SIZES = (8, 16, 32)


def scripts(paths: list[Path]) -> list[Path]:
    out: list[Path] = []
    for p in paths:
        if p.is_dir():
            out += sorted(q for q in p.rglob("*.py") if not q.name.startswith("_"))
        else:
            out.append(p)
    return out


def windows(lines: list[str]) -> list[tuple[int, str]]:
    """(first line, text) of each window around an anchor line, duplicates dropped."""
    seen: set[tuple[int, int]] = set()
    out: list[tuple[int, str]] = []
    for i, line in enumerate(lines):
        if not ANCHOR.search(line):
            continue
        for size in SIZES:
            for lo in (i - size // 2, i - size + 1):
                lo = max(0, lo)
                hi = min(len(lines), lo + size)
                if (lo, hi) in seen:
                    continue
                seen.add((lo, hi))
                out.append((lo + 1, "".join(lines[lo:hi])))
    return out


@dataclass
class Agreement:
    counts: Counter[str] = field(default_factory=Counter)
    contradicting: Counter[str] = field(default_factory=Counter)  # by fact
    extra: Counter[str] = field(default_factory=Counter)  # by fact
    shown: list[str] = field(default_factory=list)

    @property
    def findings(self) -> int:
        return sum(self.counts[k] for k in ("agreeing", "contradicting", "extra"))


def measure(files: list[Path], show: int = 0, extra_fact: str | None = None) -> Agreement:
    from ddpadvisor.errors import InputError
    from ddpadvisor.evidence.intake import _repair
    from ddpadvisor.scan import scan_excerpt, scan_file

    out = Agreement()
    for path in files:
        label = path.relative_to(REPO) if path.is_relative_to(REPO) else path
        try:
            whole = scan_file(path)
        except InputError:
            out.counts["scripts not scanned"] += 1
            continue
        reference = {f.fact: f.value for f in whole.findings}
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines(keepends=True)
        for first, text in windows(lines):
            code = _repair(text)
            try:
                found = scan_excerpt(code).findings if code is not None else None
            except InputError:
                found = None
            if found is None:
                out.counts["not parsed"] += 1
                continue
            out.counts["excerpts"] += 1
            for f in found:
                if f.fact not in reference:
                    out.counts["extra"] += 1
                    out.extra[f.fact] += 1
                    if f.fact == extra_fact and len(out.shown) < show:
                        out.shown.append(f"  extra {label}:{first}+: {f.fact}={f.value} {f.detail}")
                elif reference[f.fact] == f.value:
                    out.counts["agreeing"] += 1
                else:
                    out.counts["contradicting"] += 1
                    out.contradicting[f.fact] += 1
                    if len(out.shown) < show:
                        out.shown.append(
                            f"  {label}:{first}+: {f.fact}={f.value} "
                            f"(whole script: {reference[f.fact]})"
                        )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="*", type=Path)
    parser.add_argument("--show", type=int, default=10, help="contradictions to print")
    parser.add_argument("--extra", help="also print the extra findings of this fact")
    args = parser.parse_args(argv)
    paths = args.paths or DEFAULT
    for p in paths:
        if not p.exists():
            print(f"error: {p}: no such file or folder", file=sys.stderr)
            return 2
    files = scripts(paths)
    got = measure(files, args.show, args.extra)
    c = got.counts
    print(f"scripts {len(files)}, excerpts scanned {c['excerpts']} (not parsed {c['not parsed']})")
    print(
        f"excerpt findings {got.findings}: agreeing {c['agreeing']}, "
        f"contradicting {c['contradicting']} "
        f"({100 * c['contradicting'] / max(1, got.findings):.1f} %), extra {c['extra']}"
    )
    for title, table in (("contradictions", got.contradicting), ("extra", got.extra)):
        if table:
            print(f"{title} by fact: " + ", ".join(f"{k} {v}" for k, v in table.most_common()))
    print("\n".join(got.shown))
    return 0


if __name__ == "__main__":
    sys.exit(main())

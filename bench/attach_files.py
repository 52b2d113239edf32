"""What --attach reads from each test artifact, and how fast it reads a large log.

    python bench/attach_files.py [--big-mb 50]

For every file under tests/attach_fixtures/ (made here by the real libraries, or hand-written
excerpts): the kind detected, the facts read, the warnings. Then a plain text log of about
``--big-mb`` MB (a step and a loss per line) is written to a temporary folder and read: seconds
and MB/s. Prints figures, exits 0.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from ddpadvisor.evidence.gather import Sources, gather  # noqa: E402
from ddpadvisor.evidence.sources.attach import read_one  # noqa: E402
from ddpadvisor.service import load_engine  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--big-mb", type=float, default=50.0)
    args = ap.parse_args()
    engine = load_engine()
    root = REPO / "tests" / "attach_fixtures"
    files = sorted(p for p in root.rglob("*") if p.is_file() and p.suffix not in (".py", ".pyc"))
    total = 0
    print(f"{'file':48} {'kind':28} facts warnings")
    for path in files:
        kind = read_one(path).kind
        got = gather(engine.kb, Sources(attach=[str(path)]))
        total += len(got.observations)
        name = str(path.relative_to(root))
        print(f"{name:48} {kind:28} {len(got.observations):5} {len(got.warnings):8}")
    print(f"{len(files)} files, {total} facts")
    with tempfile.TemporaryDirectory() as tmp:
        big = Path(tmp) / "big.log"
        line_count = int(args.big_mb * 1e6 / 40)
        with big.open("w") as fh:
            for i in range(line_count):
                fh.write(f"step {i} loss {2 + math.sin(i / 50) * 0.1 + 1 / (1 + i):.6f} lr 3e-4\n")
        size = big.stat().st_size / 1e6
        start = time.perf_counter()
        got = gather(engine.kb, Sources(attach=[str(big)]))
        seconds = time.perf_counter() - start
        print(
            f"big log: {size:.1f} MB, {line_count} lines read in {seconds:.1f} s "
            f"({size / seconds:.1f} MB/s), {len(got.observations)} facts, "
            f"{len(got.warnings)} warnings"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Interactive efficiency: questions a truthful simulated user answers before the true cause
ranks first (SPEC target: median <= 6), for every cause in the bundled KB.

    python bench/simulated_user.py
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ddpadvisor.engine.diagnose import Engine
from ddpadvisor.engine.simulate import simulate
from ddpadvisor.kb.load import default_dirs, load_kb


def main() -> None:
    kb = load_kb(default_dirs())
    kb.raise_first_problem()
    engine = Engine(kb)
    firsts, settles = [], []
    print(f"{'cause':40} first  settled  questions")
    for cause in sorted(kb.causes):
        s = simulate(engine, cause)
        firsts.append(s.first_at if s.first_at is not None else 99)
        settles.append(s.settled_at if s.settled_at is not None else 99)
        first = "-" if s.first_at is None else str(s.first_at)
        settled = "-" if s.settled_at is None else str(s.settled_at)
        print(f"{cause:40} {first:>5}  {settled:>7}  {', '.join(s.asked[:8])}")
    print(f"\nmedian questions until the true cause is first : {statistics.median(firsts)}")
    print(f"median questions until it is settled (>= 85 %) : {statistics.median(settles)}")
    print(f"never first within 25 questions                : {sum(f == 99 for f in firsts)}")


if __name__ == "__main__":
    main()

"""Diagnosis and next-question time on a generated KB (default 1,000 causes x 5,000 links).

Target: under 50 ms each. Prints medians over repeated runs.

    python bench/engine_scale.py [--causes 1000 --links 5000 --facts 400 --observed 20]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ddpadvisor.engine.diagnose import Engine
from ddpadvisor.kb.synthetic import synthetic_kb
from ddpadvisor.observation import Observation
from ddpadvisor.report.present import diagnose, questions


def timed(fn, runs: int) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--causes", type=int, default=1000)
    ap.add_argument("--links", type=int, default=5000)
    ap.add_argument("--facts", type=int, default=400)
    ap.add_argument("--observed", type=int, default=20)
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    start = time.perf_counter()
    kb = synthetic_kb(args.causes, args.links, args.facts, seed=1)
    engine = Engine(kb)
    build = time.perf_counter() - start
    rng = random.Random(2)
    obs = []
    for fid in rng.sample(sorted(kb.facts), args.observed):
        fact = kb.facts[fid]
        value = {"bool": True, "enum": "a", "int": 9}[fact.type]
        obs.append(Observation(fact=fid, value=value, source="answer"))
    n_links = sum(len(c.evidence) for c in kb.causes.values())
    observed = {o.fact for o in obs}
    post = engine.posterior(obs)
    t_post = timed(lambda: engine.posterior(obs), args.runs)
    t_diag = timed(lambda: diagnose(engine, obs, top=10), args.runs)
    t_q = timed(lambda: questions(engine, post, observed), args.runs)
    print(
        f"KB: {len(kb.causes)} causes, {n_links} links, {len(kb.facts)} facts; "
        f"{len(obs)} observed; build+compile {build * 1000:.0f} ms (once per process)"
    )
    print(f"posterior (ranking)         : {t_post * 1000:7.2f} ms")
    print(f"diagnose (ranking+explain)  : {t_diag * 1000:7.2f} ms (target < 50 ms)")
    print(f"next questions (all facts)  : {t_q * 1000:7.2f} ms (target < 50 ms)")


if __name__ == "__main__":
    main()

"""Wall time of `ddpadvisor --json --answers F` against the import floor.

The floor is a bare `python -c "import pydantic, networkx, yaml"`: the dependencies a
diagnosis cannot avoid. Target: within 1.5x of the floor. Prints medians of N runs.

    python bench/cli_speed.py [--runs 15]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def median_time(cmd: list[str], runs: int, env: dict[str, str]) -> float:
    subprocess.run(cmd, check=True, capture_output=True, env=env)  # warm the OS file cache
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True, env=env)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--answers", type=Path, default=REPO / "examples" / "thread-000.yaml")
    args = ap.parse_args()
    env = {**os.environ, "DDPADVISOR_NO_USER_KB": "1"}
    floor = median_time([sys.executable, "-c", "import pydantic, networkx, yaml"], args.runs, env)
    source = (
        ["--answers", str(args.answers)]
        if args.answers.exists()
        else ["--set", "single_gpu_converges=true"]
    )
    diag = median_time([sys.executable, "-m", "ddpadvisor", "--json", *source], args.runs, env)
    print(f"floor  import pydantic, networkx, yaml : {floor * 1000:7.1f} ms")
    print(f"ddpadvisor --json {' '.join(Path(s).name for s in source)} : {diag * 1000:7.1f} ms")
    print(f"ratio                                  : {diag / floor:7.2f}x (target <= 1.5x)")


if __name__ == "__main__":
    main()

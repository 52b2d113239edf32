"""Wall time of the full probe suite (`ddpadvisor probe`, 2 gloo ranks) next to a bare launch.

    python bench/probe_suite.py [--repeat N] [--nproc 2] [--backend gloo]

The bare launch runs a script that only imports torch and joins the process group, so the
difference is what the probes themselves cost. Per-probe times come from the rank files.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROBES = ("env", "collective", "seeds", "sampler", "checksums", "scaler")
BARE = """
import torch.distributed as dist
dist.init_process_group("gloo")
dist.barrier()
dist.destroy_process_group()
"""


def bare_launch(nproc: int, folder: Path) -> float:
    script = folder / "bare.py"
    script.write_text(BARE)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    cmd += ["--nproc_per_node", str(nproc), str(script)]
    started = time.perf_counter()
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    subprocess.run(cmd, check=True, capture_output=True, env=env)
    return time.perf_counter() - started


def suite(nproc: int, backend: str, out: Path) -> tuple[float, dict[str, float]]:
    cmd = [sys.executable, "-m", "ddpadvisor", "probe", "--nproc", str(nproc)]
    cmd += ["--backend", backend, "--out", str(out), "--quiet"]
    started = time.perf_counter()
    subprocess.run(cmd, check=True)
    wall = time.perf_counter() - started
    per_probe = {}
    for name in PROBES:
        records = [json.loads(p.read_text()) for p in (out / name).glob("rank*.json")]
        per_probe[name] = max(r["seconds"] for r in records)
    return wall, per_probe


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--backend", default="gloo")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        bare = [bare_launch(args.nproc, folder) for _ in range(args.repeat)]
        walls, probes = [], []
        for i in range(args.repeat):
            wall, per_probe = suite(args.nproc, args.backend, folder / f"run{i}")
            walls.append(wall)
            probes.append(per_probe)
    print(f"bare torchrun launch ({args.nproc} ranks): median {statistics.median(bare):.1f} s")
    print(
        f"full probe suite ({args.nproc} {args.backend} ranks): median "
        f"{statistics.median(walls):.1f} s  (runs: {', '.join(f'{w:.1f}' for w in walls)})"
    )
    for name in PROBES:
        times = [p[name] for p in probes]
        print(f"  {name:<11} {statistics.median(times):6.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Step time of a CPU DDP job with and without the trace agent, at the default K.

    python bench/trace_overhead.py [--rounds 3] [--steps 120] [--nproc 2] [--every 50]

Runs bench/_overhead_train.py (a small transformer LM, 2 gloo ranks) alternately untraced
(plain ``python -m torch.distributed.run``) and traced (``ddpadvisor trace``), and compares
the mean step time after a warm-up, taking each variant's best round to damp machine noise.
Prints one line per round and the ratio; ``--check`` exits 1 when the overhead exceeds 10 %.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from ddpadvisor.tracing import DEFAULT_EVERY  # noqa: E402
from ddpadvisor.tracing.launch import run_traced, torchrun_command  # noqa: E402

SCRIPT = HERE / "_overhead_train.py"
WARMUP = 10


def _mean_step(path: Path) -> float:
    times = json.loads(path.read_text())["step_seconds"]
    body = times[WARMUP:] or times
    return statistics.fmean(body)


def run_plain(nproc: int, steps: int, out: Path) -> float:
    env = dict(os.environ, OVERHEAD_OUT=str(out), OVERHEAD_STEPS=str(steps))
    env.pop("DDPADVISOR_TRACE", None)
    subprocess.run(
        torchrun_command(nproc, [str(SCRIPT)]),
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return _mean_step(out)


def run_agent(nproc: int, steps: int, every: int, out: Path, trace_dir: Path) -> float:
    env = dict(os.environ, OVERHEAD_OUT=str(out), OVERHEAD_STEPS=str(steps))
    result = run_traced([str(SCRIPT)], trace_dir, nproc=nproc, every=every, echo=False, env=env)
    if result.status != "ok":
        raise SystemExit(f"traced run failed: {result.failure}")
    return _mean_step(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=120)
    ap.add_argument("--nproc", type=int, default=2)
    ap.add_argument("--every", type=int, default=DEFAULT_EVERY)
    ap.add_argument("--check", action="store_true", help="exit 1 if the overhead exceeds 10 %%")
    args = ap.parse_args(argv)
    plain: list[float] = []
    traced: list[float] = []
    with tempfile.TemporaryDirectory(prefix="ddpadvisor-bench-") as tmp:
        root = Path(tmp)
        for i in range(args.rounds):
            plain.append(run_plain(args.nproc, args.steps, root / f"plain{i}.json"))
            traced.append(
                run_agent(
                    args.nproc, args.steps, args.every, root / f"traced{i}.json", root / f"trace{i}"
                )
            )
            print(
                f"round {i + 1}: untraced {plain[-1] * 1e3:.2f} ms/step, "
                f"traced {traced[-1] * 1e3:.2f} ms/step",
                flush=True,
            )
    best_plain, best_traced = min(plain), min(traced)
    ratio = best_traced / best_plain
    print(
        f"step time: untraced {best_plain * 1e3:.2f} ms, traced (K={args.every}) "
        f"{best_traced * 1e3:.2f} ms, ratio {ratio:.3f} (overhead {100 * (ratio - 1):+.1f} %)"
    )
    return 1 if args.check and ratio > 1.10 else 0


if __name__ == "__main__":
    raise SystemExit(main())

"""A user rule folder of 10,000 causes: `--json` cold and warm, and `kb test`.

Generates the folder (causes linked to the bundled facts, one fix and one rule test each) in a
temporary directory, then times, in fresh processes:

- `ddpadvisor --json --kb DIR --set ...` with an empty cache (cold) and again (warm);
- `ddpadvisor kb test --kb DIR`.

Targets (issue 10): warm `--json` < 1 s, `kb test` < 60 s.

The commands run as on an ordinary install: PYTHONDONTWRITEBYTECODE is dropped from their
environment, so the cold run leaves the bytecode that the warm runs then use (with it set, every
edited module would be compiled again on each run and counted as start-up time).

    python bench/rule_folder_scale.py [--causes 10000] [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
BOOL_FACTS = [
    "uses_distributed_sampler",
    "calls_set_epoch",
    "uses_grad_scaler",
    "uses_no_sync",
    "uses_torch_compile",
    "uses_lora",
    "uses_grad_clipping",
    "has_batchnorm",
    "uses_syncbn",
    "logs_rank0_only",
    "single_gpu_converges",
    "variable_length_sequences",
]


def write_folder(folder: Path, n_causes: int, seed: int = 0) -> None:
    """One YAML file per 500 causes, so the loader's per-file work is exercised too."""
    rng = random.Random(seed)
    per_file = 500
    for start in range(0, n_causes, per_file):
        causes, fixes, tests = [], [], []
        for i in range(start, min(n_causes, start + per_file)):
            facts = rng.sample(BOOL_FACTS, 3)
            values = [rng.random() < 0.5 for _ in facts]
            causes.append(
                {
                    "id": f"synthetic-cause-{i}",
                    "title": f"Synthetic cause {i}",
                    "area": "synthetic",
                    "prior": rng.choice(["common", "uncommon", "rare"]),
                    "mechanism": "Generated for the scale benchmark.",
                    "evidence": [
                        {"fact": f, "is": v, "strength": rng.choice(["strong", "moderate"])}
                        for f, v in zip(facts, values)
                    ],
                    "fixes": [f"synthetic-fix-{i}"],
                }
            )
            fixes.append(
                {
                    "id": f"synthetic-fix-{i}",
                    "title": f"Fix {i}",
                    "steps": ["Do the generated thing."],
                    "verify": {"command": "ddpadvisor kb validate", "expect": "OK"},
                }
            )
            tests.append(
                {
                    "id": f"synthetic-test-{i}",
                    "facts": dict(zip(facts, values)),
                    "expect_in_top": [f"synthetic-cause-{i}"],
                    "k": n_causes + 100,
                }
            )
        doc = {"causes": causes, "fixes": fixes, "tests": tests}
        (folder / f"rules-{start // per_file:03d}.yaml").write_text(
            yaml.safe_dump(doc, sort_keys=False)
        )


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, int]:
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, env=env, text=True)
    if proc.returncode not in (0, 1):
        sys.stderr.write(proc.stderr[-2000:])
    return time.perf_counter() - start, proc.returncode


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--causes", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "rules"
        folder.mkdir()
        write_folder(folder, args.causes)
        env = {
            **{k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"},
            "DDPADVISOR_NO_USER_KB": "1",
            "XDG_CACHE_HOME": str(Path(tmp) / "cache"),
        }
        py = [sys.executable, "-m", "ddpadvisor"]
        diag = [*py, "--json", "--kb", str(folder), "--set", "uses_distributed_sampler=false"]
        cold, rc = timed(diag, env)
        warms = [timed(diag, env)[0] for _ in range(args.runs)]
        warm = statistics.median(warms)
        test_s, test_rc = timed([*py, "kb", "test", "--kb", str(folder)], env)
        print(f"causes in the folder        : {args.causes}")
        print(f"--json cold (no cache)      : {cold:7.2f} s (exit {rc})")
        print(f"--json warm (median of {args.runs})  : {warm:7.2f} s (target < 1 s)")
        print(f"--json warm runs            : {' '.join(f'{w:.2f}' for w in warms)} s")
        print(f"kb test                     : {test_s:7.2f} s (exit {test_rc}, target < 60 s)")


if __name__ == "__main__":
    main()

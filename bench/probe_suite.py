"""Wall time of the probe suite (2 gloo ranks) next to `accelerate test`, side by side.

    python bench/probe_suite.py [--repeat 5] [--nproc 2] [--direct] [--accelerate-bin DIR]

Each round runs ``ddpadvisor probe`` and ``accelerate test`` one right after the other, the
order alternating from round to round (probe first in rounds 1, 3, 5), so a change in the
machine's load hits both alike; the ratio of the medians is the figure the contract bounds
(<= 1.0), printed with the median of the per-round ratios. ``--direct`` adds a plain
``torchrun probes/run_all.py`` to each round. accelerate lives in the bench's own environment
(a venv under ~/.cache/ddpadvisor-bench that sees this interpreter's packages through a .pth
file and gets accelerate by pip), never in the project's; ``--accelerate-bin DIR`` uses the
``accelerate`` in DIR instead. ``accelerate test`` runs with its defaults: on a machine without
GPUs that is one process. The load average is printed with the figures; per-probe seconds and
start offsets come from the rank files of the ``ddpadvisor probe`` runs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PROBES = [e["name"] for e in json.loads((REPO / "probes" / "catalog.json").read_text())["probes"]]
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "ddpadvisor-bench"


def accelerate_env() -> Path:
    """The bench's venv with accelerate (created once, reused); returns its bin folder."""
    venv = CACHE / "accelerate-venv"
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        site = subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        # This interpreter's packages (torch, numpy) without copying them.
        (Path(site) / "_ddpadvisor_bench_parent.pth").write_text(
            sysconfig.get_paths()["purelib"] + "\n"
        )
    if not (venv / "bin" / "accelerate").exists():
        pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
        # Into this venv even where the parent environment happens to hold accelerate; then
        # whatever of its dependencies the parent lacks.
        subprocess.run([*pip, "--force-reinstall", "--no-deps", "accelerate"], check=True)
        subprocess.run([*pip, "accelerate"], check=True)
    return venv / "bin"


def timed(cmd: list[str], env: dict[str, str], cwd: Path | None = None) -> tuple[float, str]:
    started = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(
            f"{' '.join(cmd[:4])}... failed ({proc.returncode}):\n{proc.stderr[-2000:]}"
        )
    return wall, proc.stdout


def per_probe(out: Path) -> dict[str, tuple[float, float]]:
    """Probe -> (seconds, start offset from the first probe's start), slowest rank."""
    records = {p: [json.loads(f.read_text()) for f in (out / p).glob("rank*.json")] for p in PROBES}
    first = min(r.get("started", 0.0) for rs in records.values() for r in rs)
    return {
        p: (max(r["seconds"] for r in rs), max(r.get("started", first) for r in rs) - first)
        for p, rs in records.items()
        if rs
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--direct", action="store_true", help="also time torchrun run_all.py")
    parser.add_argument("--no-accelerate", action="store_true")
    parser.add_argument("--accelerate-bin", type=Path, default=None, metavar="DIR")
    args = parser.parse_args()
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    accel_bin = None
    if not args.no_accelerate:
        accel_bin = args.accelerate_bin or accelerate_env()
    load_before = os.getloadavg()
    times: dict[str, list[float]] = {"ddpadvisor probe": [], "accelerate test": []}
    if args.direct:
        times["torchrun run_all.py"] = []
    probes: list[dict[str, tuple[float, float]]] = []
    with tempfile.TemporaryDirectory() as tmp:

        def probe(i: int) -> None:
            out = Path(tmp) / f"cli{i}"
            cmd = [sys.executable, "-m", "ddpadvisor", "probe", "--nproc", str(args.nproc)]
            cmd += ["--backend", "gloo", "--out", str(out), "--quiet"]
            times["ddpadvisor probe"].append(timed(cmd, env)[0])
            probes.append(per_probe(out))

        def accelerate() -> None:
            if accel_bin is None:
                return
            accel_env = {**env, "PATH": f"{accel_bin}:{env.get('PATH', '')}"}
            wall, stdout = timed([str(accel_bin / "accelerate"), "test"], accel_env, Path(tmp))
            if "Test is a success" not in stdout:
                raise SystemExit("accelerate test did not report success")
            times["accelerate test"].append(wall)

        def direct(i: int) -> None:
            out = Path(tmp) / f"direct{i}"
            cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
            cmd += ["--nproc_per_node", str(args.nproc), str(REPO / "probes" / "run_all.py")]
            cmd += ["--backend", "gloo", "--out", str(out)]
            times["torchrun run_all.py"].append(timed(cmd, env)[0])

        for i in range(args.repeat):
            if i % 2 == 0:
                probe(i)
                accelerate()
            else:
                accelerate()
                probe(i)
            if args.direct:
                direct(i)
    load_after = os.getloadavg()
    cores = os.cpu_count()
    print(
        f"machine: {cores} cores, load average {load_before[0]:.2f} before, "
        f"{load_after[0]:.2f} after; {args.repeat} alternating rounds, medians:"
    )
    medians = {}
    for name, walls in times.items():
        if walls:
            medians[name] = statistics.median(walls)
            runs = ", ".join(f"{w:.2f}" for w in walls)
            print(f"  {name:<22} {medians[name]:6.2f} s   (runs: {runs})")
    base = medians.get("accelerate test")
    for name in ("ddpadvisor probe", "torchrun run_all.py"):
        if base and name in medians:
            print(f"  ratio {name} / accelerate test: {medians[name] / base:.2f} (medians)")
    if times["accelerate test"] and times["ddpadvisor probe"]:
        pairs = zip(times["ddpadvisor probe"], times["accelerate test"])
        ratio = statistics.median(p / a for p, a in pairs)
        print(f"  median of the per-round ratios ddpadvisor probe / accelerate test: {ratio:.2f}")
    print(f"per probe ({args.nproc} gloo ranks, slowest rank; start offset from the first):")
    for name in PROBES:
        secs = statistics.median(p[name][0] for p in probes if name in p)
        offset = statistics.median(p[name][1] for p in probes if name in p)
        print(f"  {name:<11} {secs:6.2f} s   starts at +{offset:5.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

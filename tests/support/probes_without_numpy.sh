#!/usr/bin/env bash
# The probe suite in a fresh environment that holds torch and nothing else (no numpy):
# a new venv, `pip install torch==2.13.0`, then 2 gloo ranks of probes/run_all.py under
# torchrun. Exits non-zero unless every probe of catalog.json wrote an "ok" result for both
# ranks. Usage: tests/support/probes_without_numpy.sh [OUT_DIR]   (PYTHON=python3.11 to pick)
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
python="${PYTHON:-python3}"
work="$(mktemp -d "${TMPDIR:-/tmp}/probes-no-numpy.XXXXXX")"
out="${1:-$work/results}"
trap 'rm -rf "$work"' EXIT

started=$(date +%s)
"$python" -m venv "$work/venv"
venv_python="$work/venv/bin/python"
"$venv_python" -m pip install --quiet --disable-pip-version-check --no-compile torch==2.13.0 2>&1 |
    grep -v "is ignored: it is neither a file nor a directory" || true
if "$venv_python" -c "import numpy" 2>/dev/null; then
    echo "probes_without_numpy: numpy is importable in the fresh venv; the check means nothing" >&2
    exit 1
fi
installed=$(date +%s)

# A folder of its own, as a user copies it to a node; ddpadvisor is not importable there.
cp -r "$repo/probes" "$work/probes"
rm -rf "$out"
cd "$work"
if ! OMP_NUM_THREADS=1 timeout 300 env -u PYTHONPATH "$venv_python" -m torch.distributed.run \
    --standalone --nproc_per_node 2 probes/run_all.py --backend gloo --timeout 120 \
    --out "$out" >"$work/torchrun.log" 2>&1; then
    tail -n 40 "$work/torchrun.log" >&2
    echo "probes_without_numpy: the probe suite failed without numpy" >&2
    exit 1
fi

"$venv_python" - "$work/probes/catalog.json" "$out" <<'PY'
import json
import sys
from pathlib import Path

catalog, out = Path(sys.argv[1]), Path(sys.argv[2])
names = [entry["name"] for entry in json.loads(catalog.read_text())["probes"]]
problems = []
for name in names:
    for rank in (0, 1):
        path = out / name / f"rank{rank}.json"
        if not path.is_file():
            problems.append(f"{path}: missing")
            continue
        record = json.loads(path.read_text())
        if record.get("status") != "ok" or record.get("rank") != rank:
            problems.append(f"{path}: status {record.get('status')}: {record.get('error')}")
        if name == "seeds" and "numpy" in record.get("result", {}).get("fingerprints", {}):
            problems.append(f"{path}: reports a numpy RNG where numpy is not installed")
if problems:
    print("\n".join(problems), file=sys.stderr)
    sys.exit(1)
print(f"probes_without_numpy: {len(names)} probes x 2 ranks ok without numpy")
PY
finished=$(date +%s)
echo "probes_without_numpy: venv + torch $((installed - started)) s, suite $((finished - installed)) s"

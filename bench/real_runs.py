"""Public training scripts, nearly unmodified, traced on 2 gloo ranks: what the tool says.

The zoos (tests/zoo, tests/frameworks) are scripts written for this project; this bench runs
code nobody wrote for it. Each target of ``bench/real_runs.yaml`` names a repository, a commit
and a script. The script is read from a bare mirror of the repository (``--mirrors``, default
``/work/.mirror``, ``<owner>+<name>/repo``, as the workplace's ``fetch`` leaves it), copied to a
temporary folder, edited by the few exact lines the target lists (a CUDA-only device choice
made conditional; a line that no longer matches fails the target), given data made here, and
run under ``ddpadvisor trace --nproc 2 --max-steps S``. Per target it prints the run's exit,
the optimizer steps of each rank, the verdict, the top causes from the trace (which also scans
the traced script) and whether the target's expectation holds: ``correct`` (no catalogued
cause leads at 0.30 or more) or the cause id that must lead.

    python bench/real_runs.py [--only NAME] [--max-steps 20] [--mirrors DIR] [--python PY]

``--python`` runs the scripts with another interpreter (one whose environment has what a
target ``needs``, e.g. ``datasets``); it must have ddpadvisor installed too. A target whose
mirror is missing, or whose needed modules that interpreter lacks, is reported as skipped.
Exit 0 when every target that ran met its expectation, 1 otherwise, 2 on a malformed file.
"""

from __future__ import annotations

import argparse
import array
import json
import os
import pickle
import random
import struct
import subprocess
import sys
import tempfile
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from interview import MIRRORS, extract_python  # noqa: E402  (bench/interview.py)

TARGETS = REPO / "bench" / "real_runs.yaml"
CONFIDENT = 0.30  # a catalogued cause first at or above this on correct code: a false positive
# measured facts printed per target: whether the ranks are connected and stay replicas
SHOWN = (
    "gradient_sync_present",
    "param_checksums_match",
    "uses_comm_hook",
    "grad_accum_steps",
    "scheduler_steps_per_optimizer_step",
)


class TargetProblem(ValueError):
    """A target that cannot be run as written (one line, named)."""


@dataclass
class Edit:
    old: str
    new: str
    file: str | None = None  # inside the repository; the target's script when None


@dataclass
class Target:
    name: str
    repo: str
    commit: str
    script: str
    cwd: str
    data: str
    args: list[str]
    expect: str
    edits: list[Edit] = field(default_factory=list)
    needs: list[str] = field(default_factory=list)
    # what to take from the mirror (git pathspec globs): a mirror may lack its largest files
    files: list[str] = field(default_factory=lambda: ["*.py"])


def load_targets(path: Path = TARGETS) -> list[Target]:
    doc = yaml.safe_load(path.read_text())
    out = []
    for i, raw in enumerate(doc.get("targets") or []):
        try:
            edits = [Edit(**e) for e in raw.pop("edits", [])]
            target = Target(**raw, edits=edits)
        except TypeError as exc:
            raise TargetProblem(f"{path}: target {i + 1}: {exc}") from None
        if target.data not in BUILDERS:
            raise TargetProblem(
                f"{path}: target {target.name}: no data builder '{target.data}' "
                f"(known: {', '.join(sorted(BUILDERS))})"
            )
        out.append(target)
    return out


# ----------------------------------------------------------------------------- data builders
def nanogpt_chars(folder: Path, run: Path) -> None:
    """nanoGPT's data/<name>/{train,val}.bin (uint16 token ids) and meta.pkl, from this
    repository's own Python text, character-level as its shakespeare_char prepare.py does."""
    text = "".join(
        p.read_text(errors="replace") for p in sorted((REPO / "ddpadvisor").rglob("*.py"))
    )
    text = text[:200_000]
    chars = sorted(set(text))
    index = {c: i for i, c in enumerate(chars)}
    ids = array.array("H", (index[c] for c in text))
    cut = int(len(ids) * 0.9)
    out = run / "data" / "tinychar"
    out.mkdir(parents=True, exist_ok=True)
    (out / "train.bin").write_bytes(ids[:cut].tobytes())
    (out / "val.bin").write_bytes(ids[cut:].tobytes())
    meta = {"vocab_size": len(chars), "itos": dict(enumerate(chars)), "stoi": index}
    (out / "meta.pkl").write_bytes(pickle.dumps(meta))
    (folder / "out").mkdir(exist_ok=True)


def minimind_text(folder: Path, run: Path) -> None:
    """minimind's pretraining jsonl ({"text": ...} per line), from this repository's docs."""
    rng = random.Random(0)
    lines = [
        ln.strip()
        for p in sorted(REPO.glob("**/*.md"))
        if ".venv" not in p.parts
        for ln in p.read_text(errors="replace").splitlines()
        if len(ln.strip()) > 40
    ]
    rng.shuffle(lines)
    with (folder / "pretrain.jsonl").open("w") as f:
        for ln in lines[:600]:
            f.write(json.dumps({"text": ln}, ensure_ascii=False) + "\n")


def _png(width: int, height: int, pixels: bytes) -> bytes:
    """An 8-bit RGB PNG (no PIL here: the bench's own environment need not have it)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    rows = b"".join(b"\x00" + pixels[y * width * 3 : (y + 1) * width * 3] for y in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def image_folder(folder: Path, run: Path) -> None:
    """An ImageFolder of 32x32 PNGs: 3 classes told apart by their mean colour, 32 train and
    16 val images each."""
    rng = random.Random(0)
    for split, count in (("train", 32), ("val", 16)):
        for label in range(3):
            out = folder / split / f"class{label}"
            out.mkdir(parents=True, exist_ok=True)
            for i in range(count):
                base = [60, 60, 60]
                base[label] = 180
                pixels = bytes(
                    max(0, min(255, base[c % 3] + rng.randint(-50, 50))) for c in range(32 * 32 * 3)
                )
                (out / f"{i}.png").write_bytes(_png(32, 32, pixels))


BUILDERS = {
    "nanogpt_chars": nanogpt_chars,
    "minimind_text": minimind_text,
    "image_folder": image_folder,
}


# ----------------------------------------------------------------------------- running
def apply_edits(target: Target, run: Path) -> None:
    for edit in target.edits:
        path = run / (edit.file or target.script)
        lines = path.read_text().splitlines(keepends=True)
        hits = [i for i, ln in enumerate(lines) if ln.strip() == edit.old.strip()]
        if len(hits) != 1:
            raise TargetProblem(
                f"{target.name}: {edit.file or target.script}: the line {edit.old!r} occurs "
                f"{len(hits)} times at {target.commit[:8]}, not once"
            )
        line = lines[hits[0]]
        indent = line[: len(line) - len(line.lstrip())]
        lines[hits[0]] = f"{indent}{edit.new}\n"
        path.write_text("".join(lines))


def missing_modules(python: str, needs: list[str]) -> list[str]:
    if not needs:
        return []
    probe = (
        "import importlib.util, sys; "
        f"print(' '.join(m for m in {needs!r} if importlib.util.find_spec(m) is None))"
    )
    done = subprocess.run([python, "-c", probe], capture_output=True, text=True, check=False)
    return done.stdout.split() if done.returncode == 0 else list(needs)


@dataclass
class Outcome:
    target: Target
    status: str  # ran | skipped | failed
    why: str = ""
    exit: int | None = None
    seconds: float = 0.0
    steps: dict[str, Any] = field(default_factory=dict)
    verdict: str = ""
    top: list[tuple[str, float]] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)  # the SHOWN facts the trace measured

    @property
    def met(self) -> bool:
        if self.status != "ran" or not self.top:
            return False
        lead, score = self.top[0]
        if self.target.expect == "correct":
            return lead == "other" or score < CONFIDENT
        return lead == self.target.expect


def run_target(target: Target, mirrors: Path, python: str, max_steps: int, work: Path) -> Outcome:
    git_dir = mirrors / target.repo.replace("/", "+") / "repo"
    if not git_dir.exists():
        return Outcome(target, "skipped", f"no mirror at {git_dir} (fetch {target.repo})")
    lacking = missing_modules(python, target.needs)
    if lacking:
        return Outcome(target, "skipped", f"{python} lacks {', '.join(lacking)}")
    run = work / target.name
    if not extract_python(git_dir, target.commit, run / "src", patterns=tuple(target.files)):
        return Outcome(target, "failed", f"git cannot read {target.commit[:8]} of {target.repo}")
    src = run / "src"
    apply_edits(target, src)
    data = run / "data"
    data.mkdir(parents=True, exist_ok=True)
    BUILDERS[target.data](data, src / target.cwd)
    args = [a.replace("{data}", str(data)) for a in target.args]
    out = run / "trace"
    script = str((src / target.script).resolve())
    cmd = [python, "-m", "ddpadvisor", "trace", "--nproc", "2", "--max-steps", str(max_steps)]
    cmd += ["--timeout", "600", "--quiet", "--out", str(out), "--", script, *args]
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", OMP_NUM_THREADS="1")
    env.setdefault("DDPADVISOR_NO_USER_KB", "1")
    started = time.monotonic()
    done = subprocess.run(
        cmd, cwd=src / target.cwd, env=env, capture_output=True, text=True, check=False
    )
    seconds = time.monotonic() - started
    diag = subprocess.run(
        [python, "-m", "ddpadvisor", "--json", "--trace", str(out)],
        cwd=src / target.cwd,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    try:
        doc = json.loads(diag.stdout)
    except json.JSONDecodeError:
        last = (diag.stderr or done.stderr).strip().splitlines()[-1:] or ["no output"]
        return Outcome(target, "failed", last[0], done.returncode, seconds)
    steps = {}
    for path in sorted(out.glob("rank*.jsonl")):
        for line in path.read_text().splitlines():
            rec = json.loads(line) if line.strip().startswith("{") else {}
            if rec.get("k") == "end":
                steps[path.stem] = rec.get("opt_steps")
    top = [(c["id"], round(float(c["score"]), 3)) for c in doc["causes"][:3]]
    facts = {
        f["fact"]: f["value"] for f in doc["facts"] if f["fact"] in SHOWN and f["source"] == "trace"
    }
    return Outcome(
        target, "ran", "", done.returncode, seconds, steps, str(doc.get("verdict", "")), top, facts
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", help="run the target of this name only")
    parser.add_argument("--max-steps", type=int, default=20)
    parser.add_argument("--mirrors", type=Path, default=MIRRORS)
    parser.add_argument("--python", default=sys.executable, help="interpreter to run under")
    parser.add_argument("--targets", type=Path, default=TARGETS)
    args = parser.parse_args(argv)
    try:
        targets = load_targets(args.targets)
    except TargetProblem as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (OSError, yaml.YAMLError) as exc:
        print(f"error: {args.targets}: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    if args.only:
        targets = [t for t in targets if t.name == args.only]
    outcomes = []
    with tempfile.TemporaryDirectory(prefix="ddpadvisor-real-runs-") as tmp:
        for target in targets:
            print(
                f"{target.name}: {target.repo}@{target.commit[:8]} {target.script} ...", flush=True
            )
            try:
                got = run_target(target, args.mirrors, args.python, args.max_steps, Path(tmp))
            except TargetProblem as exc:
                got = Outcome(target, "failed", str(exc))
            outcomes.append(got)
            if got.status != "ran":
                print(f"  {got.status}: {got.why}")
                continue
            tops = ", ".join(f"{c} {s:.2f}" for c, s in got.top)
            print(f"  exit {got.exit} in {got.seconds:.0f} s; optimizer steps {got.steps}")
            print(f"  verdict {got.verdict}; top: {tops}")
            print("  measured: " + ", ".join(f"{k}={v}" for k, v in got.facts.items()))
            print(f"  expect {target.expect}: {'met' if got.met else 'NOT MET'}")
    ran = [o for o in outcomes if o.status == "ran"]
    print(
        f"\n{len(ran)} of {len(outcomes)} targets ran; expectation met by "
        f"{sum(o.met for o in ran)}; skipped {sum(o.status == 'skipped' for o in outcomes)}; "
        f"failed {sum(o.status == 'failed' for o in outcomes)}"
    )
    return 0 if all(o.met for o in ran) and not any(o.status == "failed" for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())

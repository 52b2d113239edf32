"""The scanner on real public training code: how often a script leads with a catalogued cause.

Every repository mirrored under ``--mirrors`` (bare git dirs ``<owner>+<name>/repo``, as the
workplace's fetch leaves them) is read at HEAD: its Python files go to a cache outside this
repository, and each file that sets up distributed training (DistributedDataParallel,
init_process_group, an accelerate Accelerator) is scanned with its folder, as
``ddpadvisor --script`` would. Code at HEAD is mostly correct, so a cause leading at or above
``--bar`` is a confident finding to read by hand: a false positive, or a real bug. Files of test
suites are counted apart (their losses are synthetic and some faults deliberate).

    python bench/real_scripts.py [--mirrors /work/.mirror] [--bar 0.3]

Prints one line per confident file and the totals; exits 0 (2 when no mirror is there).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from interview import MIRRORS, extract_python  # bench/ is this script's own folder
from interview import SCRIPT_CACHE as CACHE

DISTRIBUTED = re.compile(r"DistributedDataParallel|init_process_group|Accelerator\(")
CATCH_ALL = "other"


def is_test_file(rel: Path) -> bool:
    """A file of a test suite (``tests/``, ``test_*.py``) rather than a training script."""
    return rel.name.startswith("test_") or any(
        p in ("tests", "test", "unit_tests") for p in rel.parts[:-1]
    )


def checkout(git_dir: Path, cache: Path) -> Path | None:
    """HEAD's Python files of one mirror, extracted once into the cache."""
    head = subprocess.run(
        ["git", "--git-dir", str(git_dir), "rev-parse", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    )
    if head.returncode != 0:
        return None
    folder = cache / f"{git_dir.parent.name}@{head.stdout.strip()[:12]}"
    if folder.is_dir() or extract_python(git_dir, head.stdout.strip(), folder):
        return folder
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mirrors", type=Path, default=MIRRORS, help="folder of bare git mirrors")
    parser.add_argument(
        "--bar", type=float, default=0.3, help="a leading score counted as confident"
    )
    args = parser.parse_args(argv)

    from ddpadvisor.errors import InputError
    from ddpadvisor.evidence.script_scan import scan_script
    from ddpadvisor.report.present import diagnose
    from ddpadvisor.service import load_engine

    repos = sorted(p for p in args.mirrors.glob("*+*/repo") if p.is_dir())
    if not repos:
        print(f"error: no mirrors (<owner>+<name>/repo) under {args.mirrors}", file=sys.stderr)
        return 2
    engine = load_engine()
    files = confident = unreadable = 0
    in_tests = Counter[str]()
    for git_dir in repos:
        folder = checkout(git_dir, CACHE / "heads")
        if folder is None:
            print(f"{git_dir.parent.name}: not readable at HEAD, skipped")
            continue
        for path in sorted(p for p in folder.rglob("*.py") if p.is_file()):
            if not DISTRIBUTED.search(path.read_text(encoding="utf-8", errors="replace")):
                continue
            try:
                gathered = scan_script(engine.kb, path)
            except InputError as exc:  # Python 2 files, vendored templates: not scannable
                unreadable += 1
                print(f"skipped: {exc.one_line()}")
                continue
            files += 1
            test = is_test_file(path.relative_to(folder))
            in_tests["files"] += test
            top = diagnose(engine, list(gathered.observations)).causes[0]
            if top.id != CATCH_ALL and top.score >= args.bar:
                confident += 1
                in_tests["confident"] += test
                mark = "  (test suite)" if test else ""
                print(f"{top.score:.2f} {top.id:36} {path.relative_to(CACHE / 'heads')}{mark}")
    print(f"repositories {len(repos)}, distributed files scanned {files}, unparsable {unreadable}")
    print(f"leading with a catalogued cause at >= {args.bar:.2f}: {confident}")
    print(
        f"  of which in test suites (not training jobs: synthetic losses, deliberate faults): "
        f"{in_tests['confident']} of {in_tests['files']} test files"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

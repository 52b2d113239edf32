"""Run several probes in one launch, so torch's import and the rendezvous are paid once.

    torchrun --nproc_per_node N run_all.py --out DIR [--probes env,collective,...] [options]

The probes and their order come from catalog.json. Every probe file in this folder also runs
alone; this runner loads them by path (under private module names, so they never shadow the
user's modules) and hands them to the shared harness, which runs them in order on every rank.
``--help`` lists every probe's options.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # for _harness.py beside it
import _harness

sys.path.pop(0)


def split_probes(argv: list[str], known: list[str]) -> tuple[list[str], list[str]]:
    """Take ``--probes a,b`` (or ``--probes=a,b``) out of argv; default: every known probe."""
    names, rest, i = list(known), [], 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--probes" and i + 1 < len(argv):
            names, i = argv[i + 1].split(","), i + 2
            continue
        if arg.startswith("--probes="):
            names = arg.split("=", 1)[1].split(",")
        else:
            rest.append(arg)
        i += 1
    return [n.strip() for n in names if n.strip()], rest


def main(argv: list[str] | None = None) -> int:
    known = _harness.catalog()
    names, rest = split_probes(list(sys.argv[1:] if argv is None else argv), known)
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        sys.stderr.write(f"run_all.py: unknown probe(s) {unknown}; choose from {known}\n")
        return 2
    modules = [_harness.load_probe(n) for n in names]
    return int(_harness.probe_main(modules, rest))


if __name__ == "__main__":
    sys.exit(main())

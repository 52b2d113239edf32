"""Run several probes in one launch, so torch's import and the rendezvous are paid once.

    torchrun --nproc_per_node N run_all.py --out DIR [--probes env,collective,...] [options]

Every probe file in this folder also runs alone; this runner loads them by path (under
private module names, so they never shadow the user's modules) and hands them to the shared
harness, which runs them in order on every rank. ``--help`` lists every probe's options.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import types

PROBES = ("env", "collective", "seeds", "sampler", "checksums", "scaler")
HERE = os.path.dirname(os.path.abspath(__file__))


def load_probe(name: str) -> types.ModuleType:
    key = f"ddpadvisor_probe_{name}"
    if key not in sys.modules:
        spec = importlib.util.spec_from_file_location(key, os.path.join(HERE, f"{name}.py"))
        if spec is None or spec.loader is None:
            raise ImportError(name)
        module = importlib.util.module_from_spec(spec)
        sys.modules[key] = module
        spec.loader.exec_module(module)
    return sys.modules[key]


def split_probes(argv: list[str]) -> tuple[list[str], list[str]]:
    """Take ``--probes a,b`` (or ``--probes=a,b``) out of argv; default: every probe."""
    names, rest, i = list(PROBES), [], 0
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
    names, rest = split_probes(list(sys.argv[1:] if argv is None else argv))
    unknown = [n for n in names if n not in PROBES]
    if unknown or not names:
        sys.stderr.write(f"run_all.py: unknown probe(s) {unknown}; choose from {PROBES}\n")
        return 2
    modules = [load_probe(n) for n in names]
    return int(modules[0].probe_main(modules, rest))


if __name__ == "__main__":
    sys.exit(main())

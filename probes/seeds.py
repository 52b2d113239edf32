"""Probe `seeds`: are the random number generators seeded the same way on every rank?

Each rank runs the user's seeding (``--setup MODULE:FUNC``, called as FUNC() or FUNC(rank)),
then fingerprints the python, numpy, torch and CUDA RNG states. The fingerprints are compared
across ranks and each outcome is explained: identical torch state is what parameters created
outside DDP's initial broadcast need; distinct augmentation streams per rank are fine.

Without --setup it fingerprints the state a fresh process has (torch's fixed default seed,
python and numpy seeded from the OS), which says nothing about the user's script.

Run alone: ``torchrun --nproc_per_node N seeds.py --out DIR [--setup mymod:seed_all]``.
"""

from __future__ import annotations

import argparse
import hashlib
import inspect
import os
import random
import sys
import types
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # for _harness.py beside it
import _harness

sys.path.pop(0)

NAME = "seeds"

CONSEQUENCES = {
    ("torch", True): (
        "torch RNG identical on every rank: parameters created from it start equal on every "
        "rank, including any created after DDP wraps the model (adapters, new heads); dropout "
        "masks also match across ranks, which is harmless."
    ),
    ("torch", False): (
        "torch RNG differs between ranks: harmless for parameters that exist when DDP wraps "
        "the model (DDP copies rank 0's to every rank), but anything created after wrapping "
        "starts different on each rank and those replicas drift apart."
    ),
    ("cuda", True): "CUDA RNG identical on every rank (dropout masks on GPU match across ranks).",
    ("cuda", False): (
        "CUDA RNG differs between ranks: fine for dropout; parameters initialised on the GPU "
        "after wrapping would start different on each rank."
    ),
    ("python", True): (
        "python RNG identical on every rank: augmentation drawn from it makes the same random "
        "choices on every rank (each rank still reads different samples), so the global batch "
        "is less diverse."
    ),
    ("python", False): (
        "python RNG differs between ranks: fine for augmentation; nothing that must agree across "
        "ranks (which layers to freeze, a shuffle done without DistributedSampler) may use it."
    ),
    ("numpy", True): (
        "numpy RNG identical on every rank: augmentation drawn from it repeats the same choices "
        "on every rank, so the global batch is less diverse."
    ),
    ("numpy", False): (
        "numpy RNG differs between ranks: fine for augmentation; nothing that must agree across "
        "ranks may use it."
    ),
}
WORKERS_NOTE = (
    "DataLoader workers seed themselves from the main process's torch RNG, so identical torch "
    "state also gives identical worker augmentation on every rank unless worker_init_fn or the "
    "loader's generator mixes in the rank."
)


def add_args(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("seeds probe")
    called = "the training script's seeding function, called as FUNC() or FUNC(rank)"
    group.add_argument("--setup", default=None, metavar="MODULE:FUNC", help=called)


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def rng_fingerprints() -> dict[str, str]:
    """Short hashes of this process's RNG states: python, numpy (if installed), torch, cuda."""
    import torch

    out = {"python": _digest(repr(random.getstate()).encode())}
    try:
        import numpy as np

        state = np.random.get_state()
        out["numpy"] = _digest(state[1].tobytes() + repr(state[2:]).encode())
    except ImportError:
        pass
    out["torch"] = _digest(bytes(torch.get_rng_state().tolist()))
    if torch.cuda.is_available():
        out["cuda"] = _digest(bytes(torch.cuda.get_rng_state().tolist()))
    return out


def run_setup(spec: str, rank: int) -> None:
    func = _harness.load_object(spec)
    required = [
        p
        for p in inspect.signature(func).parameters.values()
        if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    func(rank) if required else func()


def run(args: argparse.Namespace, ctx: types.SimpleNamespace) -> dict[str, Any]:
    import torch

    if args.setup:
        run_setup(args.setup, ctx.rank)
    mine = rng_fingerprints()
    gathered = _harness.all_gather_json(mine, ctx.world_size)
    streams = sorted({s for g in gathered for s in g})
    by_rank = {s: [g.get(s) for g in gathered] for s in streams}
    identical = {s: len(set(values)) == 1 for s, values in by_rank.items()}
    consequences = [CONSEQUENCES[(s, same)] for s, same in identical.items()]
    if identical.get("torch"):
        consequences.append(WORKERS_NOTE)
    differ = [s for s, same in identical.items() if not same]
    summary = (
        ("after " + args.setup if args.setup else "without --setup (fresh-process state)")
        + ": "
        + (
            "all RNG streams identical on every rank"
            if not differ
            else "differ: " + ", ".join(differ)
        )
    )
    return {
        "summary": summary,
        "subject": "user" if args.setup else "builtin",
        "setup": args.setup,
        "fingerprints": mine,
        "torch_initial_seed": int(torch.initial_seed()),
        "by_rank": by_rank,
        "identical": identical,
        "all_identical": not differ,
        "consequences": consequences,
    }


if __name__ == "__main__":
    sys.exit(_harness.probe_main([sys.modules[__name__]]))

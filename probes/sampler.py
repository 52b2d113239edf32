"""Probe `sampler`: how DistributedSampler splits the data between ranks and epochs.

Every rank builds its sampler the way the training script does and draws two epochs of
indices, once calling ``set_epoch`` and once without. The indices are all-gathered and
compared: overlap between ranks (beyond DistributedSampler's padding of fewer than world-size
samples), coverage of the dataset, batches per rank, and whether epoch 2 repeats epoch 1.

Describe the script's sampler with --dataset-size, --batch-size, --seed (with --seed-per-rank
if the script passes seed + rank), --no-shuffle and --drop-last, or pass
``--dataset MODULE:FACTORY`` where FACTORY() returns a map-style dataset, a sampler or a
DataLoader (it may call torch.distributed.get_rank()). --calls-set-epoch says whether the
training loop calls set_epoch, which decides which of the two epoch orders applies.

Run alone: ``torchrun --nproc_per_node N sampler.py --out DIR --dataset-size 103``.
Importable: ``shard_report(indices_per_rank, dataset_len)``.
"""

from __future__ import annotations

import argparse
import os
import sys
import types
from collections import Counter
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # for _harness.py beside it
import _harness

sys.path.pop(0)

NAME = "sampler"
DEFAULTS = {"dataset_size": 103, "batch_size": 4, "seed": 0}


def add_args(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("sampler probe (what the training script does)")
    group.add_argument("--dataset", default=None, metavar="MODULE:FACTORY")
    group.add_argument("--dataset-size", type=int, default=None, help="default 103")
    group.add_argument("--batch-size", type=int, default=None, help="per rank, default 4")
    group.add_argument("--seed", type=int, default=None, help="DistributedSampler seed, default 0")
    group.add_argument("--seed-per-rank", action="store_true", help="the script passes seed+rank")
    group.add_argument("--no-shuffle", action="store_true")
    group.add_argument("--drop-last", action="store_true")
    group.add_argument("--calls-set-epoch", choices=("yes", "no"), default=None)


def shard_report(indices_per_rank: list[list[int]], dataset_len: int) -> dict[str, Any]:
    """Overlap, coverage and duplicates of one epoch's indices across ranks.

    ``overlap`` maps "i-j" to the number of distinct indices ranks i and j share (pairs with
    none are left out). ``padding_duplicates`` are the repeats DistributedSampler adds to even
    out the shards (fewer than the world size); ``excess_duplicates`` are all other repeats:
    any means ranks read the same samples.
    """
    world = len(indices_per_rank)
    holders: dict[int, set[int]] = {}
    for rank, indices in enumerate(indices_per_rank):
        for index in indices:
            holders.setdefault(int(index), set()).add(rank)
    pairs: Counter[str] = Counter()
    for ranks in holders.values():
        if len(ranks) > 1:
            ordered = sorted(ranks)
            for a_pos, a in enumerate(ordered):
                for b in ordered[a_pos + 1 :]:
                    pairs[f"{a}-{b}"] += 1
    total = sum(len(indices) for indices in indices_per_rank)
    unique = len(holders)
    duplicates = total - unique
    padding = min(duplicates, max(0, total - dataset_len), max(0, world - 1))
    covered = sum(1 for i in holders if 0 <= i < dataset_len)
    return {
        "overlap": dict(sorted(pairs.items())),
        "coverage": covered / dataset_len if dataset_len else 1.0,
        "padding_duplicates": padding,
        "duplicates": duplicates,
        "excess_duplicates": duplicates - padding,
        "per_rank": [len(indices) for indices in indices_per_rank],
        "unique": unique,
    }


class _Indexable:
    """A stand-in map-style dataset of the given size (only its length matters)."""

    def __init__(self, size: int):
        self.size = size

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> int:
        return index


def _build(args: argparse.Namespace, ctx: types.SimpleNamespace) -> tuple[Any, Any, int]:
    """(sampler or DataLoader, object to call set_epoch on, dataset length)."""
    from torch.utils.data import DataLoader, DistributedSampler, Sampler

    shuffle = not args.no_shuffle
    seed = DEFAULTS["seed"] if args.seed is None else args.seed
    if args.seed_per_rank:
        seed += ctx.rank
    if args.dataset:
        made = _harness.load_object(args.dataset)()
        if isinstance(made, DataLoader):
            return made, made.sampler, len(made.dataset)  # type: ignore[arg-type]
        if isinstance(made, Sampler):
            dataset = getattr(made, "dataset", None)
            size = len(dataset) if dataset is not None else len(made)  # type: ignore[arg-type]
            return made, made, size
        dataset = made
    else:
        size = DEFAULTS["dataset_size"] if args.dataset_size is None else args.dataset_size
        dataset = _Indexable(size)
    sampler = DistributedSampler(
        dataset,
        num_replicas=ctx.world_size,
        rank=ctx.rank,
        shuffle=shuffle,
        seed=seed,
        drop_last=args.drop_last,
    )
    return sampler, sampler, len(dataset)


def _draw(source: Any) -> list[int]:
    """One epoch of indices, flattened from batches when the source yields batches."""
    from torch.utils.data import DataLoader

    if isinstance(source, DataLoader):
        batches = source.batch_sampler if source.batch_sampler is not None else source.sampler
        out: list[int] = []
        for item in batches:  # type: ignore[union-attr]
            out.extend(int(i) for i in (item if isinstance(item, (list, tuple)) else [item]))
        return out
    return [int(i) for i in source]


def run(args: argparse.Namespace, ctx: types.SimpleNamespace) -> dict[str, Any]:

    source, epoch_target, size = _build(args, ctx)
    batch = DEFAULTS["batch_size"] if args.batch_size is None else args.batch_size
    draws: dict[str, list[list[int]]] = {}
    for variant in ("with_set_epoch", "without_set_epoch"):
        epochs = []
        for epoch in range(2):
            if variant == "with_set_epoch" and hasattr(epoch_target, "set_epoch"):
                epoch_target.set_epoch(epoch)
            elif hasattr(epoch_target, "set_epoch"):
                epoch_target.set_epoch(0)  # never advanced: what a loop without set_epoch sees
            epochs.append(_draw(source))
        draws[variant] = epochs
    gathered = _harness.all_gather_json(draws, ctx.world_size)

    report: dict[str, Any] = {}
    for variant in draws:
        per_epoch = [shard_report([g[variant][e] for g in gathered], size) for e in range(2)]
        repeats = all(g[variant][0] == g[variant][1] for g in gathered)
        report[variant] = {"epochs": per_epoch, "order_repeats": repeats}
    first = report["with_set_epoch"]["epochs"][0]
    counts = first["per_rank"]
    steps = [(n // batch if args.drop_last else -(-n // batch)) for n in counts]
    overlap = first["excess_duplicates"] > 0
    given = [
        args.dataset,
        args.dataset_size,
        args.batch_size,
        args.seed,
        args.seed_per_rank or None,
        args.no_shuffle or None,
        args.drop_last or None,
        args.calls_set_epoch,
    ]
    chosen = None
    if args.calls_set_epoch:
        variant = "with_set_epoch" if args.calls_set_epoch == "yes" else "without_set_epoch"
        chosen = report[variant]["order_repeats"]
    summary = (
        f"{size} samples on {ctx.world_size} ranks: "
        + (
            f"ranks SHARE {first['excess_duplicates']} samples beyond padding"
            if overlap
            else "disjoint shards"
        )
        + f", coverage {first['coverage']:.0%}, {first['padding_duplicates']} padding duplicate(s)"
        + "; epoch 2 repeats epoch 1: "
        + f"with set_epoch {'yes' if report['with_set_epoch']['order_repeats'] else 'no'}, "
        + f"without {'yes' if report['without_set_epoch']['order_repeats'] else 'no'}"
    )
    return {
        "summary": summary,
        "subject": "user" if any(v is not None for v in given) else "builtin",
        "config": {
            "dataset": args.dataset,
            "dataset_size": size,
            "batch_size": batch,
            "seed": DEFAULTS["seed"] if args.seed is None else args.seed,
            "seed_per_rank": args.seed_per_rank,
            "shuffle": not args.no_shuffle,
            "drop_last": args.drop_last,
            "calls_set_epoch": args.calls_set_epoch,
            "world_size": ctx.world_size,
        },
        "with_set_epoch": report["with_set_epoch"],
        "without_set_epoch": report["without_set_epoch"],
        "shards_overlap": overlap,
        "coverage": first["coverage"],
        "batches_per_rank": steps,
        "equal_batches": len(set(steps)) == 1,
        "order_repeats_across_epochs": chosen,
    }


if __name__ == "__main__":
    sys.exit(_harness.probe_main([sys.modules[__name__]]))

"""DistributedSampler seeds and set_epoch, checked in one process by building every rank's
sampler with explicit num_replicas/rank (no process group needed)."""

from __future__ import annotations

from collections.abc import Callable
from itertools import combinations

import pytest

torch = pytest.importorskip("torch")
from torch.utils.data.distributed import DistributedSampler  # noqa: E402

N_ITEMS = 103
WORLD = 4


def samplers(seed_of_rank: Callable[[int], int]) -> list[DistributedSampler]:
    return [
        DistributedSampler(
            range(N_ITEMS), num_replicas=WORLD, rank=rank, shuffle=True, seed=seed_of_rank(rank)
        )
        for rank in range(WORLD)
    ]


def shards(seed_of_rank: Callable[[int], int], epoch: int | None = None) -> list[list[int]]:
    out = []
    for sampler in samplers(seed_of_rank):
        if epoch is not None:
            sampler.set_epoch(epoch)
        out.append(list(sampler))
    return out


def overlap(parts: list[list[int]]) -> int:
    return max(len(set(a) & set(b)) for a, b in combinations(parts, 2))


def coverage(parts: list[list[int]]) -> float:
    return len(set().union(*parts)) / N_ITEMS


def test_same_seed_gives_disjoint_covering_shards() -> None:
    """With one seed everywhere the shards cover the data; the only shared indices are the
    padding that evens out 103 items over 4 ranks."""
    parts = shards(lambda rank: 0)
    padding = WORLD * len(parts[0]) - N_ITEMS
    assert coverage(parts) == 1.0
    assert overlap(parts) <= padding < WORLD


def test_seed_per_rank_overlaps_and_misses_samples() -> None:
    """seed=rank: each rank slices a different permutation, so shards overlap and part of
    the data is never seen in the epoch."""
    parts = shards(lambda rank: rank)
    assert coverage(parts) < 0.9
    assert overlap(parts) > WORLD


def test_without_set_epoch_order_repeats() -> None:
    """Without set_epoch the sampler replays the same order every epoch (shards still disjoint)."""
    same = samplers(lambda rank: 0)
    first = [list(s) for s in same]  # epoch 0
    second = [list(s) for s in same]  # epoch 1, the loop forgot set_epoch
    assert first == second
    assert coverage(first) == 1.0


def test_set_epoch_changes_order_keeps_shards_disjoint() -> None:
    """set_epoch(e) reshuffles per epoch while every rank still agrees on the permutation."""
    epoch0, epoch1 = shards(lambda rank: 0, epoch=0), shards(lambda rank: 0, epoch=1)
    assert epoch0 != epoch1
    assert coverage(epoch1) == 1.0
    assert overlap(epoch1) < WORLD

"""Gradient accumulation under DDP, with and without no_sync, right and wrong.

k micro-steps of b samples per rank are compared with one process computing the mean loss
over all k*W*b samples at once (the gradient of the intended effective batch).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from tests.experiments.conftest import Results

pytestmark = pytest.mark.slow

ROUNDING = 1e-6


def _both(ddp_results: Results, variant: str) -> list[dict]:
    return [rank[variant] for rank in ddp_results("accumulation")]


def test_accumulation_without_no_sync_matches_full_batch(ddp_results: Results) -> None:
    """Syncing on every micro-step gives the full effective-batch gradient: each allreduce
    averages the accumulated .grad, so nothing is double counted and the batch does grow."""
    ranks = _both(ddp_results, "sync_every_step")
    for rank in ranks:
        assert rank["max_diff_vs_reference"] < ROUNDING
    assert ranks[0]["grad"] == ranks[1]["grad"]


def test_accumulation_with_no_sync_matches_full_batch(ddp_results: Results) -> None:
    """no_sync on micro-steps 1..k-1 gives the same gradient; it only saves communication."""
    ranks = _both(ddp_results, "no_sync")
    plain = _both(ddp_results, "sync_every_step")
    for rank, other in zip(ranks, plain):
        assert rank["max_diff_vs_reference"] < ROUNDING
        assert max(abs(a - b) for a, b in zip(rank["grad"], other["grad"])) < ROUNDING
    assert ranks[0]["grad"] == ranks[1]["grad"]


def test_accumulation_steps_not_divisible_by_world_size(ddp_results: Results) -> None:
    """k=3 micro-steps on 2 ranks match the reference with and without no_sync."""
    for variant in ("k3_sync_every_step", "k3_no_sync"):
        ranks = _both(ddp_results, variant)
        assert ranks[0]["k"] % 2 == 1
        for rank in ranks:
            assert rank["max_diff_vs_reference"] < ROUNDING


def test_sync_flag_set_after_forward_leaves_ranks_unsynced(ddp_results: Results) -> None:
    """DDP decides in forward whether the next backward syncs: turning the flag on after the
    last forward leaves each rank with its own local gradient."""
    ranks = _both(ddp_results, "flag_after_forward")
    assert ranks[0]["grad"] != ranks[1]["grad"]
    for rank in ranks:
        assert rank["max_diff_vs_reference"] > 0.01


def test_off_by_one_no_sync_leaves_ranks_unsynced(ddp_results: Results) -> None:
    """Syncing the first micro-step instead of the last leaves later micro-batches local."""
    ranks = _both(ddp_results, "off_by_one")
    assert ranks[0]["grad"] != ranks[1]["grad"]
    for rank in ranks:
        assert rank["max_diff_vs_reference"] > 0.01


def test_no_sync_around_backward_only_still_syncs(ddp_results: Results) -> None:
    """no_sync wrapped around backward alone does nothing: the forward already armed the sync."""
    ranks = _both(ddp_results, "no_sync_backward_only")
    assert ranks[0]["grad"] == ranks[1]["grad"]
    for rank in ranks:
        assert rank["max_diff_vs_reference"] < ROUNDING


def test_zero_grad_inside_accumulation_drops_micro_batches(ddp_results: Results) -> None:
    """zero_grad on every micro-step keeps only the last micro-batch: ranks agree, but the
    gradient is not the effective-batch gradient."""
    ranks = _both(ddp_results, "zero_grad_inside")
    assert ranks[0]["grad"] == ranks[1]["grad"]
    assert ranks[0]["max_diff_vs_reference"] > 0.01


def test_loss_not_divided_by_k_scales_gradient(ddp_results: Results) -> None:
    """Forgetting to divide the loss by k multiplies the gradient by exactly k."""
    for rank in _both(ddp_results, "loss_not_divided"):
        assert rank["norm_ratio_to_reference"] == pytest.approx(rank["k"], rel=1e-4)

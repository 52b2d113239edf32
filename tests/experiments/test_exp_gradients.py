"""What DDP does to gradients: averaging, clipping, unused and frozen parameters, loss scaling.

Each test backs the verdict of one or more forum claims in kb/claims/ (their `experiment:`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from tests.experiments.conftest import Results

pytestmark = pytest.mark.slow

# fp32 rounding of a 49-element gradient computed two ways.
ROUNDING = 1e-6


def test_mean_loss_ddp_equals_full_batch_gradient(ddp_results: Results) -> None:
    """Per-rank mean loss + DDP's average is the mean over the global batch: no double scaling.

    The gradient is final as soon as backward() returns (no stale, half-reduced buckets).
    """
    for rank in ddp_results("mean_vs_sum"):
        assert rank["mean"]["max_diff_vs_reference"] < ROUNDING


def test_sum_loss_gives_local_batch_times_larger_gradient(ddp_results: Results) -> None:
    """Switching to reduction='sum' multiplies every gradient by the per-rank batch size."""
    for rank in ddp_results("mean_vs_sum"):
        b = rank["local_batch"]
        ratios = rank["sum"]["ratio_to_reference"]
        assert b > 1
        assert all(abs(r - b) < 1e-3 * b for r in ratios)


def test_gradients_identical_on_every_rank_after_backward(ddp_results: Results) -> None:
    """After a synced backward every rank holds bit-for-bit the same gradient."""
    ranks = ddp_results("mean_vs_sum")
    assert ranks[0]["mean"]["grad"] == ranks[1]["mean"]["grad"]


def test_clip_norm_after_backward_is_global_and_identical(ddp_results: Results) -> None:
    """clip_grad_norm_ after DDP's backward measures the averaged gradient: the same value on
    every rank, matching one process on all the samples, and at most the mean of the
    ranks' local norms, so a single-GPU threshold needs no scaling by the GPU count."""
    ranks = ddp_results("clip_norm")
    norms = [r["post_sync_norm"] for r in ranks]
    assert norms[0] == norms[1]
    assert abs(norms[0] - ranks[0]["single_process_global_norm"]) < ROUNDING
    local = ranks[0]["all_local_pre_sync_norms"]
    assert local[0] != local[1]  # the ranks really saw different data
    assert norms[0] <= sum(local) / len(local)


def test_second_average_after_ddp_backward_changes_nothing(ddp_results: Results) -> None:
    """All-reducing and dividing again after DDP's backward returns the same gradient
    (the work was already done); all-reducing without dividing doubles it on 2 ranks."""
    for rank in ddp_results("manual_average"):
        assert rank["average_again_max_diff"] < ROUNDING
        assert abs(rank["sum_again_ratio"] - 2.0) < 1e-5


def test_find_unused_parameters_averages_with_zero(ddp_results: Results) -> None:
    """find_unused_parameters=True: a parameter used on one rank only is averaged with zero,
    one used nowhere keeps grad None, and the replicas stay identical."""
    ranks = ddp_results("find_unused")
    for rank in ranks:
        assert rank["grad_b"] == pytest.approx(rank["local_grad_b_on_rank0"] / 2)
        assert rank["grad_c_is_none"]
    assert ranks[0]["params"] == ranks[1]["params"]


def test_frozen_parameters_are_not_reduced(ddp_results: Results) -> None:
    """Only parameters that require grad when DDP is built enter its buckets."""
    for rank in ddp_results("frozen_not_reduced"):
        assert rank["frozen"]
        assert rank["reduced"] == rank["trainable"]
        assert not set(rank["frozen"]) & set(rank["reduced"])
        assert rank["frozen_grads_none"]


def test_per_rank_token_mean_misweights_ranks(ddp_results: Results) -> None:
    """A per-rank token mean weighs a 3-token rank like a 1000-token one; normalising by the
    global token count (times world size, which DDP divides back out) is exact."""
    for rank in ddp_results("token_weighting"):
        ref = rank["reference_grad"]
        assert abs(rank["per_rank_mean"] - ref) > 1.0
        assert rank["global_token_normalised"] == pytest.approx(ref, abs=1e-5)


def test_ddp_adamw_matches_single_process_global_batch(ddp_results: Results) -> None:
    """Six AdamW steps under DDP (LayerNorm included) track one process on the same global
    batches to fp32 rounding: the optimizer state evolves exactly as on one GPU."""
    ranks = ddp_results("adam_equivalence")
    for rank in ranks:
        assert rank["max_param_diff_vs_single_process"] < 1e-6
    assert ranks[0]["params"] == ranks[1]["params"]
    assert ranks[0]["layernorm_params"] == ranks[1]["layernorm_params"]

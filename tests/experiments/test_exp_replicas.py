"""When DDP replicas are made equal, and what later changes it never repairs."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from tests.experiments.conftest import Results

pytestmark = pytest.mark.slow


def test_wrap_broadcasts_rank0_parameters_including_frozen(ddp_results: Results) -> None:
    """Different initial weights per rank, frozen ones included, are overwritten with rank 0's
    when DDP is built: init differences cannot survive into training."""
    ranks = ddp_results("init_broadcast")
    for part in ("all", "frozen"):
        assert ranks[0]["before_wrap"][part] != ranks[1]["before_wrap"][part]
        assert ranks[0]["after_wrap"][part] == ranks[1]["after_wrap"][part]
        assert ranks[0]["after_wrap"][part] == ranks[0]["before_wrap"][part]


def test_change_after_wrap_is_never_undone(ddp_results: Results) -> None:
    """A rank-0-only change after wrapping (like loading a checkpoint on rank 0) is never
    broadcast: after five synced AdamW steps the replicas still differ by about that change."""
    ranks = ddp_results("init_broadcast")
    assert ranks[0]["after_training"]["all"] != ranks[1]["after_training"]["all"]
    gap = ranks[0]["after_training"]["bias"] - ranks[1]["after_training"]["bias"]
    assert gap == pytest.approx(1.0, abs=1e-3)


def test_adapter_added_after_wrap_is_never_synchronised(ddp_results: Results) -> None:
    """An adapter injected after DDP(...) with the same init on every rank drifts apart,
    with or without find_unused_parameters, and no error is raised."""
    ranks = ddp_results("adapter_after_wrap")
    for key in ("find_unused=False", "find_unused=True"):
        assert ranks[0][key]["error"] is None and ranks[1][key]["error"] is None
        assert ranks[0][key]["base"] == ranks[1][key]["base"]
        assert ranks[0][key]["adapter"] != ranks[1][key]["adapter"]


def test_layer_unfrozen_after_wrap_is_never_synchronised(ddp_results: Results) -> None:
    """Freezing layers, wrapping, then unfreezing them later trains them locally per rank."""
    ranks = ddp_results("unfreeze_after_wrap")
    assert ranks[0]["error"] is None and ranks[1]["error"] is None
    assert ranks[0]["always_trainable_layer"] == ranks[1]["always_trainable_layer"]
    assert ranks[0]["unfrozen_layer"] != ranks[1]["unfrozen_layer"]


def test_bucket_settings_leave_training_bitwise_identical(ddp_results: Results) -> None:
    """bucket_cap_mb in {default, 0.001, 100} x gradient_as_bucket_view in {False, True}, with
    no_sync accumulation: parameters after five AdamW steps are bitwise identical."""
    for rank in ddp_results("bucket_settings"):
        assert len(rank) == 6
        assert len(set(rank.values())) == 1


def test_compiled_ddp_matches_eager(ddp_results: Results) -> None:
    """torch.compile(DDP(model)) (aot_eager, torch 2.13, CPU) gives the eager synced gradient
    and still honours no_sync. Says nothing about inductor on CUDA or about PyTorch 2.0."""
    ranks = ddp_results("compiled_ddp")
    for rank in ranks:
        assert rank["max_diff_compiled_vs_eager"] == 0.0
    assert ranks[0]["compiled_grad"] == ranks[1]["compiled_grad"]
    assert ranks[0]["no_sync_grad"] != ranks[1]["no_sync_grad"]

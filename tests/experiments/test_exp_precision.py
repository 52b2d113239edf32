"""Mixed precision: GradScaler under DDP (multi-rank) and half-precision numerics (one process)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from tests.experiments.conftest import Results

torch = pytest.importorskip("torch")


@pytest.mark.slow
def test_grad_scaler_stays_in_lockstep_under_ddp(ddp_results: Results) -> None:
    """GradScaler runs no collective, yet an inf on rank 1 only reaches both ranks through
    DDP's allreduce: both skip the step and halve the scale together."""
    ranks = ddp_results("grad_scaler")
    steps0, steps1 = ranks[0]["steps"], ranks[1]["steps"]
    assert steps0 == steps1
    assert [s["skipped"] for s in steps0] == [False, True, False]
    assert steps0[1]["scale"] == steps0[0]["scale"] / 2


def test_adam_eps_rounds_to_zero_in_fp16() -> None:
    """Adam's default eps=1e-8 is 0 in fp16; 1e-6 survives."""
    assert torch.tensor(1e-8, dtype=torch.float16).item() == 0.0
    assert torch.tensor(1e-6, dtype=torch.float16).item() > 0.0
    assert torch.tensor(1e-8, dtype=torch.bfloat16).item() > 0.0


def test_small_update_vanishes_in_half_precision() -> None:
    """A 3e-6 step on a 0.01 weight is lost in fp16 (and 3e-5 in bf16): pure half-precision
    weights stop learning at small learning rates."""
    w16 = torch.tensor(0.01, dtype=torch.float16)
    assert bool(w16 + torch.tensor(3e-6, dtype=torch.float16) == w16)
    wbf = torch.tensor(0.01, dtype=torch.bfloat16)
    assert bool(wbf + torch.tensor(3e-5, dtype=torch.bfloat16) == wbf)
    w32 = torch.tensor(0.01, dtype=torch.float32)
    assert bool(w32 + 3e-6 != w32)


@pytest.mark.parametrize("grad", [0.0, 1e-4])
def test_adam_on_fp16_parameters_produces_nonfinite(grad: float) -> None:
    """torch.optim.Adam on fp16 weights with the default eps turns a zero or tiny gradient
    into NaN/inf; with eps=1e-6 the same step stays finite."""

    def step(eps: float) -> torch.Tensor:
        p = torch.nn.Parameter(torch.full((4,), 0.5, dtype=torch.float16))
        opt = torch.optim.Adam([p], lr=1e-3, eps=eps)
        p.grad = torch.full((4,), grad, dtype=torch.float16)
        opt.step()
        return p.detach()

    assert not torch.isfinite(step(1e-8)).any()
    assert torch.isfinite(step(1e-6)).all()


def test_bf16_has_fp32_range_fp16_does_not() -> None:
    """bf16 keeps fp32's exponent range, so it needs no loss scaling; fp16 overflows at
    65504 and flushes small gradients to zero, which is what GradScaler exists for."""
    assert torch.finfo(torch.bfloat16).max > 1e38
    assert torch.finfo(torch.float16).max == 65504.0
    assert torch.isinf(torch.tensor(70000.0, dtype=torch.float16))
    assert torch.tensor(1e-8, dtype=torch.float16).item() == 0.0
    assert torch.tensor(1e-30, dtype=torch.bfloat16).item() > 0.0

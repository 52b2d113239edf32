"""Which classification-loss calls the agent records (hooks/losses.py): the targets a call
kept matter where the loop divides a summed or unreduced loss by a count, class weights or
not; a weighted mean divides by the weights' sum and says nothing of the count."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from ddpadvisor.tracing.agent.ddpadvisor_trace_agent.hooks import losses


class _Window:
    def __init__(self) -> None:
        self.ce: list[list[Any]] = []


class _Agent:
    def __init__(self) -> None:
        self.window = _Window()


@pytest.mark.parametrize(
    ("reduction", "weighted", "recorded"),
    [
        ("mean", False, "m"),
        ("mean", True, None),
        ("sum", True, "s"),
        ("none", True, "n"),
        ("none", False, "n"),
    ],
)
def test_which_loss_calls_are_recorded(reduction, weighted, recorded) -> None:  # type: ignore[no-untyped-def]
    logits = torch.randn(6, 3, requires_grad=True)
    target = torch.tensor([0, 1, -100, 2, -100, 1])
    kwargs: dict[str, Any] = {"reduction": reduction, "ignore_index": -100}
    if weighted:
        kwargs["weight"] = torch.tensor([1.0, 2.0, 0.5])
    a = _Agent()
    losses._record(a, (logits, target), kwargs)  # type: ignore[arg-type]
    if recorded is None:
        assert a.window.ce == []
    else:
        [(kept, given, red)] = a.window.ce
        assert (int(kept), given, red) == (4, 6, recorded)

"""The optimizer record (``opt``) names the optimizer a wrapper steps, and the reader takes
the update rule from it: a ZeroRedundancyOptimizer over SGD trains as SGD does."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from ddpadvisor.evidence.trace import read_trace
from ddpadvisor.tracing.agent.ddpadvisor_trace_agent.core import _optimizer_record


class ShardedLike(torch.optim.Optimizer):
    """The shape of ZeroRedundancyOptimizer (which needs a process group): an Optimizer that
    keeps the one it steps, built from ``optimizer_class``, in ``self.optim``."""

    def __init__(self, params: Any, optimizer_class: type, **kw: Any) -> None:
        params = list(params)
        super().__init__(params, {})
        self.optim = optimizer_class(params, **kw)


class LookaheadLike:
    """A wrapper that is no Optimizer itself, holding one as ``base_optimizer``."""

    def __init__(self, base: torch.optim.Optimizer) -> None:
        self.base_optimizer = base
        self.param_groups = base.param_groups


def _params() -> list[torch.nn.Parameter]:
    return list(torch.nn.Linear(2, 2).parameters())


def test_the_record_names_the_wrapped_optimizer() -> None:
    assert "inner" not in _optimizer_record(torch.optim.AdamW(_params()))
    rec = _optimizer_record(ShardedLike(_params(), torch.optim.SGD, lr=0.1, momentum=0.9))
    assert (rec["cls"], rec["inner"]) == ("ShardedLike", "SGD")
    nested = LookaheadLike(ShardedLike(_params(), torch.optim.Adam, lr=1e-3))
    assert _optimizer_record(nested)["inner"] == "Adam"


@pytest.mark.parametrize(
    ("cls", "inner", "family"),
    [("ZeroRedundancyOptimizer", "SGD", "sgd"), ("ZeroRedundancyOptimizer", None, "other"),
     ("AdamW", None, "adam")],
)  # fmt: skip
def test_the_family_is_the_wrapped_optimizers(
    tmp_path: Path, engine: Any, cls, inner, family
) -> None:  # type: ignore[no-untyped-def]
    folder = tmp_path / "trace"
    folder.mkdir()
    for rank in (0, 1):
        opt: dict[str, Any] = {"k": "opt", "cls": cls, "hp": {"lr": 0.1}, "groups": 1,
                               "n_params": 2}  # fmt: skip
        if inner:
            opt["inner"] = inner
        recs = [{"k": "start", "v": 3, "rank": rank, "world": 2, "backend": "gloo"}, opt]
        recs += [{"k": "step", "s": s, "loss": [1.0], "fac": [1.0], "syn": [True], "lr": [0.1],
                  "sch": 0} for s in (1, 2, 3)]  # fmt: skip
        (folder / f"rank{rank}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    facts = {o.fact: o for o in read_trace(engine.kb, folder).observations}
    assert facts["optimizer_family"].value == family

"""How long a learning-rate schedule was built to run, against what it ran.

The agent reads a scheduler's planned length where the scheduler states it (``_planned_steps``,
probed in a subprocess with the agent folder on the path, as a rank would import it); the
reader turns the end record's ``plans`` into ``lr_schedule_fraction_run``, only for a job that
ended by itself. The same end record says whether DeepSpeed was imported at all
(``uses_deepspeed``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ddpadvisor.evidence.trace import read_trace
from ddpadvisor.tracing import agent_dir

PROBE = """
import torch
from torch.optim import lr_scheduler as L
from transformers import get_cosine_schedule_with_warmup, get_constant_schedule_with_warmup
from ddpadvisor_trace_agent.hooks.optim import _planned_steps

def opt():
    return torch.optim.SGD([torch.nn.Parameter(torch.zeros(2))], lr=0.1)

def two_groups():  # decay / no-decay, as the HF Trainer builds them
    ps = [torch.nn.Parameter(torch.zeros(2)), torch.nn.Parameter(torch.zeros(2))]
    return torch.optim.AdamW([{"params": ps[:1]}, {"params": ps[1:], "weight_decay": 0.0}])

o = opt()
seq = L.SequentialLR(o, [L.LinearLR(o, 0.1, total_iters=5), L.CosineAnnealingLR(o, T_max=20)],
                     milestones=[5])
cases = {
    "onecycle": L.OneCycleLR(opt(), max_lr=0.1, epochs=3, steps_per_epoch=12),
    "cosine": L.CosineAnnealingLR(opt(), T_max=40),
    "poly": L.PolynomialLR(opt(), total_iters=30),
    "sequential": seq,
    "hf_cosine": get_cosine_schedule_with_warmup(opt(), 10, 90),
    "hf_cosine_groups": get_cosine_schedule_with_warmup(two_groups(), 10, 120),
    "hf_constant": get_constant_schedule_with_warmup(opt(), 10),
    "step": L.StepLR(opt(), step_size=5),
    "lambda": L.LambdaLR(opt(), lambda s: 0.9 ** s),
    "restarts": L.CosineAnnealingWarmRestarts(opt(), T_0=10),
}
for name, s in cases.items():
    print(name, _planned_steps(s))
"""


def test_planned_length_where_the_scheduler_states_it() -> None:
    env = {**os.environ, "PYTHONPATH": str(agent_dir())}
    proc = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=300, env=env
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = dict(line.split() for line in proc.stdout.splitlines())
    assert got == {
        "onecycle": "36",
        "cosine": "40",
        "poly": "30",
        "sequential": "25",  # the last milestone plus the cosine's T_max
        "hf_cosine": "90",  # num_training_steps of the partial
        "hf_cosine_groups": "120",  # the same partial for both param groups
        "hf_constant": "None",  # no end: constant after warmup
        "step": "None",
        "lambda": "None",  # a bare lambda says nothing of a length
        "restarts": "None",
    }


@pytest.fixture(scope="module")
def kb(engine):  # type: ignore[no-untyped-def]
    return engine.kb


def _trace(tmp_path: Path, end: dict[str, Any], exception: bool = False) -> Path:
    folder = tmp_path / "t"
    folder.mkdir()
    for rank in (0, 1):
        recs: list[dict[str, Any]] = [
            {"k": "start", "v": 3, "rank": rank, "world": 2, "backend": "gloo"},
            {"k": "wrap", "ddp": 0, "n_buffers": 0, "batchnorm": [], "dtypes": ["float32"]},
        ]
        for s in range(1, 37):
            recs.append({"k": "step", "s": s, "loss": [1.0], "syn": [True], "lr": [0.1], "sch": 1})
        if exception:
            recs.append({"k": "exception", "type": "RuntimeError", "msg": "x", "where": "a.py:1"})
        recs.append({"k": "end", "s": 36, "sched": 36, **end})
        (folder / f"rank{rank}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    return folder


@pytest.mark.parametrize(
    ("end", "exception", "fraction"),
    [
        ({"why": "exit", "plans": [["OneCycleLR", 72, 36, 36]]}, False, 0.5),
        ({"why": "exit", "plans": [["OneCycleLR", 36, 36, 36]]}, False, 1.0),
        # an earlier phase's schedule first, the training's last
        (
            {"why": "exit", "plans": [["LambdaLR", 10, 10, 10], ["OneCycleLR", 144, 36, 36]]},
            False,
            0.25,
        ),
        ({"why": "max_steps", "plans": [["OneCycleLR", 72, 36, 36]]}, False, None),  # cut short
        ({"why": "exit", "plans": [["OneCycleLR", 72, 36, 36]]}, True, None),  # it crashed
        ({"why": "exit"}, False, None),  # no scheduler with a planned end
    ],
)
def test_fraction_of_the_schedule_run(tmp_path, kb, end, exception, fraction):  # type: ignore[no-untyped-def]
    facts = {o.fact: o for o in read_trace(kb, _trace(tmp_path, end, exception)).observations}
    got = facts.get("lr_schedule_fraction_run")
    assert (got.value if got else None) == fraction
    if fraction == 0.5:  # the length counted over the whole dataset
        assert "the world size times the run" in got.detail


@pytest.mark.parametrize(
    ("planned", "counts"),
    [
        (72, True),  # W = 2 times the 36 steps taken: counted over the whole dataset
        (74, True),  # within 5 %: a remainder of the dataset's length
        (108, False),  # 3 times: no count of parallel work of this run
        (40, None),  # the plan ran to 90 %: nothing to explain
    ],
)
def test_a_plan_that_is_the_world_size_times_the_run(tmp_path, kb, planned, counts):  # type: ignore[no-untyped-def]
    end = {"why": "exit", "plans": [["OneCycleLR", planned, 36, 36]]}
    facts = {o.fact: o.value for o in read_trace(kb, _trace(tmp_path, end)).observations}
    assert facts.get("lr_schedule_plan_counts_parallelism") is counts


@pytest.mark.parametrize(("dsmod", "uses"), [(False, False), (True, None)])
def test_deepspeed_never_imported_is_no_deepspeed_job(tmp_path, kb, dsmod, uses):  # type: ignore[no-untyped-def]
    """DeepSpeed not imported on any rank: no engine ran. Imported but no engine recorded:
    not said (an engine built before the agent's wrapper could have gone unseen)."""
    facts = {
        o.fact: o.value
        for o in read_trace(kb, _trace(tmp_path, {"why": "exit", "dsmod": dsmod})).observations
    }
    assert facts.get("uses_deepspeed") is uses

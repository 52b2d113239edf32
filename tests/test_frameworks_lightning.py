"""The Lightning zoo (tests/frameworks/lightning): Trainer(strategy="ddp") under torchrun,
accumulate_grad_batches, gradient_clip_val, bf16-mixed, a module's own sampler.

Each job is traced once on 2 CPU ranks (tests/frameworks/cases.py) and checked against issue
11's bar: optimizer steps on every rank; on a correct job no catalogued cause first at 0.30 or
more, by the trace, by --script or by both; an injected fault first by the trace and in the
top 3 by --script.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "frameworks"))
from cases import real_launch_check, zoo_module  # tests/frameworks/cases.py

pytestmark, outcomes, test_case = zoo_module("lightning")
# correct_trainer.py once more through torchrun: the fork runner must measure what it measures
real_launch, test_fork_runner_measures_what_a_real_launch_measures = real_launch_check(
    "lightning", "correct_trainer.py"
)

"""The HF Trainer zoo (tests/frameworks/hf_trainer): TrainingArguments from the command
line and from JSON, accumulation, the Trainer's token-count loss, Trainer subclasses.

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

pytestmark, outcomes, test_case = zoo_module("hf_trainer")
# trainer_cli_accum.py once more through torchrun: the fork runner must measure what it measures
real_launch, test_fork_runner_measures_what_a_real_launch_measures = real_launch_check(
    "hf_trainer", "trainer_cli_accum.py"
)

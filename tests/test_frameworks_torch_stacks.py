"""The plain-torch zoo (tests/frameworks/torch_stacks): nanoGPT-style loops, FSDP1, FSDP2
(fully_shard) and ZeroRedundancyOptimizer.

Each job is traced once on 2 CPU ranks (tests/frameworks/cases.py) and checked against issue
11's bar: optimizer steps on every rank; on a correct job no catalogued cause first at 0.30 or
more, by the trace, by --script or by both; an injected fault first by the trace and in the
top 3 by --script.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "frameworks"))
from cases import zoo_module  # tests/frameworks/cases.py

pytestmark, outcomes, test_case = zoo_module("torch_stacks")

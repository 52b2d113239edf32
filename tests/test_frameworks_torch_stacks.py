"""The plain-torch zoo (tests/frameworks/torch_stacks): nanoGPT-style loops (eager, and compiled
with aot_eager before the DDP wrap), FSDP1, FSDP2 (fully_shard) and ZeroRedundancyOptimizer.

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


def test_compiled_ddp_is_traced_through_the_graph_splits(outcomes: dict) -> None:
    """nanoGPT compiled (aot_eager) before the DDP wrap, its buckets small enough that
    DDPOptimizer splits the graph: the agent's hooks sit on the DDP wrapper and on DDP's comm
    hook, outside the compiled regions, so they still see every forward's sync flag and every
    bucket's all-reduce."""
    facts = outcomes["torch_stacks/nanogpt_compiled.py"].facts
    assert facts.get("uses_torch_compile") is True, facts
    assert facts.get("final_micro_step_synced") is True, facts
    assert isinstance(facts.get("synced_grad_norm_ratio"), float), facts  # comm hook's norms
    assert facts.get("param_checksums_match") is True, facts
    late = outcomes["torch_stacks/nanogpt_compiled_sync_flag_late.py"].facts
    assert late.get("final_micro_step_synced") is False, late

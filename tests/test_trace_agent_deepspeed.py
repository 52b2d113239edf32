"""The agent's DeepSpeed patch in a fresh interpreter (no launch): installing the agent imports
no DeepSpeed; once the job imported it, the engine's methods are wrapped, and uninstall puts
the originals back."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

AGENT = Path(__file__).resolve().parent.parent / "ddpadvisor" / "tracing" / "agent"

CHILD = """
import sys
sys.path.insert(0, sys.argv[1])
import torch
import ddpadvisor_trace_agent as agent
from ddpadvisor_trace_agent.hooks import deepspeed as patch
agent.install()
print("deepspeed imported by install:", "deepspeed" in sys.modules)
import deepspeed
from deepspeed.runtime.engine import DeepSpeedEngine as E
originals = {n: getattr(E, n) for n in ("__init__", "forward", "backward", "step")}
patch._ensure()  # what the agent runs when the process group starts, or at the first backward
print("wrapped:", all(getattr(getattr(E, n), "__ddpadvisor__", False) for n in originals))
agent.uninstall()
print("restored:", all(getattr(E, n) is f for n, f in originals.items()))
"""


@pytest.mark.skipif(importlib.util.find_spec("deepspeed") is None, reason="no deepspeed")
def test_the_engine_is_wrapped_only_once_the_job_imported_deepspeed(tmp_path):  # type: ignore[no-untyped-def]
    env = dict(os.environ, DDPADVISOR_TRACE=str(tmp_path), DS_ACCELERATOR="cpu")
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(AGENT)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    lines = [line for line in out.stdout.splitlines() if ":" in line]
    assert "deepspeed imported by install: False" in lines, out.stdout
    assert "wrapped: True" in lines, out.stdout
    assert "restored: True" in lines, out.stdout

"""``ddpadvisor trace``: run a training script under torchrun with the trace agent injected.

The agent lives in ``agent/`` (a ``sitecustomize`` plus ``ddpadvisor_trace_agent``) and needs
only the standard library and torch, so that folder can be put on ``PYTHONPATH`` of any job.
"""

from __future__ import annotations

from pathlib import Path

ENV_DIR = "DDPADVISOR_TRACE"
ENV_EVERY = "DDPADVISOR_TRACE_EVERY"
ENV_MAX_STEPS = "DDPADVISOR_TRACE_MAX_STEPS"
DEFAULT_EVERY = 50


def agent_dir() -> Path:
    """The folder to put first on PYTHONPATH to enable the agent in a job."""
    return Path(__file__).resolve().parent / "agent"

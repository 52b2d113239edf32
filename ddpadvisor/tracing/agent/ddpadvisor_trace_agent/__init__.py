"""The ddpadvisor trace agent: records what a DDP job really does, per rank and per step.

Installed by ``sitecustomize`` (the folder above) right after the job imports torch.
It only uses torch's extension points and thin wrappers around public entry points:

* global optimizer step pre/post hooks: the step boundary, LR, periodic checksums;
* a DDP communication hook that delegates to the stock all-reduce (or to the user's own hook):
  whether a backward synchronised, pre-sync local and post-sync global gradient norms;
* forward hooks on each DDP module and its inner module: input digests, the
  ``require_backward_grad_sync`` flag, forwards that bypass the wrapper;
* global module/parameter registration hooks: modules created after wrapping;
* wrappers of ``Tensor.backward``, ``zero_grad``, ``clip_grad_norm_``, ``GradScaler``,
  LR schedulers, ``BatchSampler``/``DistributedSampler``, ``load_state_dict``, ``autocast``,
  and the classification losses (``cross_entropy``, ``nll_loss``: the targets each one kept).

Each rank writes ``rank<R>.jsonl`` in ``$DDPADVISOR_TRACE``: one JSON object per line, written
and flushed per record. Per-step values stay tensors on their device; records holding CUDA
tensors are queued and copied to the host in one transfer every few steps, so a GPU job gets no
per-step host synchronisation from the agent. Parameter, buffer, gradient and optimizer-state
fingerprints are taken every K steps (more often at the start) and written like everything
else: the agent runs no collective of its own, so ranks that step unevenly (a rank-0-only
phase, ``join()``, evaluation on one rank) are never held up; the reader compares the ranks'
files offline, step by step.

The agent never draws random numbers, never writes to a user tensor and never raises into the
user's code: a failure inside a hook disables that part of the agent and is logged once.

Layout: ``runtime`` (limits, the installed agent, the wrapper helper), ``writer`` (the JSONL
file), ``core`` (the agent), ``format`` (record kinds and version, shared with the reader),
``hooks/<subsystem>`` (one patch each, listed in ``hooks.PATCHES``, each with ``install`` and
``uninstall``). ``DDPADVISOR_TRACE_OFF=data,amp`` leaves the named patches out.

This ``__init__`` and ``format`` import nothing but the standard library (the reader imports
``format``); the rest is imported by :func:`install`, after the job imported torch. Standard
library and torch only, so the agent folder can be copied to a cluster on its own.
"""

from __future__ import annotations

import os
import sys
from typing import Any

ENV_DIR = "DDPADVISOR_TRACE"
ENV_OFF = "DDPADVISOR_TRACE_OFF"  # comma-separated patch names to leave out


def install() -> None:
    """Install every patch once. Safe to call again; does nothing without ``$DDPADVISOR_TRACE``.

    A patch that fails to install is taken back out and named on stderr; the job goes on."""
    if not os.environ.get(ENV_DIR):
        return
    import torch

    from . import runtime as rt

    if rt.AGENT is not None or getattr(torch, "_ddpadvisor_agent", False):
        return
    torch._ddpadvisor_agent = True  # type: ignore[attr-defined]
    from pathlib import Path

    from .core import Agent
    from .hooks import PATCHES

    every = _int_env(rt.ENV_EVERY, rt.DEFAULT_EVERY)
    max_steps = _int_env(rt.ENV_MAX_STEPS, 0) or None
    rt.AGENT = Agent(Path(os.environ[ENV_DIR]).resolve(), every, max_steps)
    off = {p.strip() for p in os.environ.get(ENV_OFF, "").split(",") if p.strip()}
    for name, patch in PATCHES.items():
        if name in off:
            continue
        rt.CURRENT[0] = name
        try:
            patch.install()
        except Exception as exc:  # one missing entry point must not cost the others
            patch.uninstall()
            sys.stderr.write(f"ddpadvisor agent: patch {name!r} skipped: {exc!r}\n")
        finally:
            rt.CURRENT[0] = ""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        rt.AGENT.safe("activate", rt.AGENT.activate)


def uninstall() -> None:
    """Take every patch back out (for tests; a traced job keeps the agent to its end)."""
    if "torch" not in sys.modules:
        return
    from . import runtime as rt
    from .hooks import PATCHES

    for patch in reversed(list(PATCHES.values())):
        patch.uninstall()
    rt.AGENT = None
    sys.modules["torch"]._ddpadvisor_agent = False  # type: ignore[attr-defined]


def agent() -> Any:
    """The installed agent (for tests)."""
    if "torch" not in sys.modules:
        return None
    from . import runtime as rt

    return rt.AGENT


def _int_env(name: str, default: int) -> int:
    try:
        return int(os.environ.get(name) or default)
    except ValueError:
        sys.stderr.write(f"ddpadvisor agent: {name}={os.environ.get(name)!r} is not a number\n")
        return default

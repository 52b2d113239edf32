"""State and plumbing shared by the agent's modules: limits, the installed agent, the
re-entrancy guard and the wrapper helper that records how to undo each patch."""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable
from typing import Any

import torch

AGENT: Any = None  # the installed Agent (core.Agent), read by every hook at call time
UNDO: dict[str, list[Callable[[], None]]] = {}  # patch name -> how to take its parts back out
CURRENT = [""]  # the patch being installed (its undo list receives the wrappers made)


def on_undo(fn: Callable[[], None]) -> None:
    """Register how to undo one part of the patch being installed."""
    UNDO.setdefault(CURRENT[0], []).append(fn)


def undo(name: str) -> None:
    """Take every part of patch ``name`` back out, newest first; never raises."""
    for fn in reversed(UNDO.pop(name, [])):
        with contextlib.suppress(Exception):
            fn()


def tolist(t: Any) -> Any:
    """``Tensor.tolist`` as torch defines it (the agent wraps the public one)."""
    return _ORIG.get("tolist", torch.Tensor.tolist)(t)


def _local(t: Any) -> Any:
    """This rank's part of a DTensor (FSDP2 parameters, their gradients and optimizer state);
    any other tensor as it is. Reading it never runs a collective."""
    to_local = getattr(t, "to_local", None)
    if to_local is not None and getattr(t, "placements", None) is not None:
        return to_local()
    return t


LATE: list[tuple[str, Callable[[], None]]] = []  # (patch, installer) run once at the first backward
# (patch, installer) run each time a process group starts: a library the job imported before
# torch.distributed (DeepSpeed's init_distributed) is wrapped before it builds its engine
ON_ACTIVATE: list[tuple[str, Callable[[], None]]] = []


def _run_each(installers: list[tuple[str, Callable[[], None]]]) -> None:
    """Run each installer under its name; one that fails never stops the rest or the job."""
    for name, fn in installers:
        CURRENT[0] = name
        try:
            fn()
        except Exception:
            pass
        finally:
            CURRENT[0] = ""


def run_on_activate() -> None:
    """Run the activation installers (each may run again at a later activation)."""
    _run_each(list(ON_ACTIVATE))


def run_late() -> None:
    """Patch entry points of modules the job imported after torch (FSDP's own clipping, say),
    without importing them for every job. Each runs once; a failure leaves the rest."""
    pending, LATE[:] = list(LATE), []
    _run_each(pending)


ENV_DIR = "DDPADVISOR_TRACE"


ENV_EVERY = "DDPADVISOR_TRACE_EVERY"


ENV_MAX_STEPS = "DDPADVISOR_TRACE_MAX_STEPS"


DEFAULT_EVERY = 50


RNG_FETCHES_PER_ITERATOR = 32  # RNG digests cost ~20 us; the first batches of each epoch suffice


INDEX_CHUNK_BATCHES = 64  # sampler indices are written in chunks of this many batches


INDEX_LIMIT = 65536  # above this many indices per epoch, keep a hash-selected subset


DEVICE_FLUSH_EVERY = 16  # optimizer steps between host copies of queued CUDA values


DIGEST_PREFIX = 4096  # elements of each input tensor that enter the order-sensitive digest


PENDING_LIMIT = 4096  # records kept before the process group exists (then written)


SMALL_COLLECTIVE = 16  # user collectives on at most this many elements count as metric reductions


_internal = threading.local()  # set while the agent itself runs torch code that we also wrap


def _busy() -> bool:
    return getattr(_internal, "depth", 0) > 0


class _Internal:
    def __enter__(self) -> None:
        _internal.depth = getattr(_internal, "depth", 0) + 1

    def __exit__(self, *exc: object) -> None:
        _internal.depth -= 1


INTERNAL = _Internal()


def _in_data_worker() -> bool:
    try:
        return torch.utils.data.get_worker_info() is not None
    except Exception:
        return False


def _compiling() -> bool:
    try:
        return bool(torch.compiler.is_compiling())
    except Exception:
        return False


_ORIG: dict[str, Any] = {}


def _wrap(owner: Any, name: str, key: str, make: Callable[[Any], Any]) -> None:
    original = getattr(owner, name, None)
    if original is None or getattr(original, "__ddpadvisor__", False):
        return
    _ORIG.setdefault(key, original)
    wrapper = make(original)
    functools.update_wrapper(wrapper, original)
    wrapper.__ddpadvisor__ = True
    setattr(owner, name, wrapper)
    on_undo(lambda: setattr(owner, name, original))

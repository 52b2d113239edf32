"""Hooks into torch: the random streams of DataLoader worker processes.

A worker draws its augmentations from its own generators: DataLoader seeds torch, ``random``
and numpy in each worker from one draw of the main process's torch generator (``base_seed``
plus the worker id, torch/utils/data/_utils/worker.py), then runs the job's
``worker_init_fn``. Where every rank seeds its main generator alike and the init function does
not mix the rank in, worker k of every rank replays one stream: the global batch is augmented
alike on all ranks. The main process never sees those draws (its generators do not move while
a worker fetches), so the agent asks the workers.

While a DataLoader with workers builds an iterator, its ``worker_init_fn`` is swapped for a
:class:`WorkerProbe` around the job's own (restored right after: the job never sees the
probe). In the worker, after the job's function ran, the probe wraps the worker's fetcher and
appends, for the worker's first fetches, the generator digests before and after each one to
``rank<R>.workers.jsonl`` beside the rank's trace (one short line per write, opened for
appending: workers of one rank never interleave a line). Record (``wfetch``): ``it`` the
rank's count of iterators with workers, ``w`` the worker id, ``n`` the fetch's number in that
worker, ``b`` and ``a`` the digests [torch, python, numpy] before and after.
"""

from __future__ import annotations

import contextlib
import json
import os
from typing import Any

from .. import runtime as rt
from ..runtime import _wrap

WORKER_ITERATORS = 4  # iterators with workers probed per rank (the first epochs)
WORKER_FETCHES = 4  # fetches recorded per worker
SUFFIX = "workers.jsonl"


class WorkerProbe:
    """A worker_init_fn: the job's own first, then the fetch probe (picklable for workers
    started by spawn: the job's function must be picklable there anyway)."""

    def __init__(self, job_fn: Any, path: str, it: int) -> None:
        self.job_fn = job_fn
        self.path = path
        self.it = it

    def __call__(self, worker_id: int) -> None:
        if self.job_fn is not None:
            self.job_fn(worker_id)
        # the job's data must flow whatever happens to the probe
        with contextlib.suppress(Exception):
            _probe_fetches(self.path, self.it, int(worker_id))


def _digests() -> list[str]:
    from ..core import _rng_digest

    return _rng_digest()


def _probe_fetches(path: str, it: int, worker_id: int) -> None:
    """In a worker: wrap the fetchers' ``fetch`` (this process only) to write the first
    fetches' generator digests."""
    from torch.utils.data._utils import fetch as fetch_mod

    count = [0]

    def make(orig: Any) -> Any:
        def fetch(self: Any, possibly_batched_index: Any) -> Any:
            n = count[0]
            if n >= WORKER_FETCHES:
                return orig(self, possibly_batched_index)
            count[0] = n + 1
            before = _digests()
            out = orig(self, possibly_batched_index)
            after = _digests()
            rec = {"k": "wfetch", "it": it, "w": worker_id, "n": n, "b": before, "a": after}
            with open(path, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(rec) + "\n")
            return out

        return fetch

    for name in ("_MapDatasetFetcher", "_IterableDatasetFetcher"):
        cls = getattr(fetch_mod, name, None)
        if cls is not None and "fetch" in vars(cls):
            cls.fetch = make(vars(cls)["fetch"])


def install() -> None:
    from torch.utils.data import dataloader as dl_mod

    def make_get_iterator(orig: Any) -> Any:
        def _get_iterator(self: Any) -> Any:
            a = rt.AGENT
            if (
                a is None
                or not a.active
                or not a.writer.mine
                or int(getattr(self, "num_workers", 0) or 0) <= 0
                or a.rank is None
                or a.worker_iterators >= WORKER_ITERATORS
            ):
                return orig(self)
            a.worker_iterators += 1
            job_fn = self.worker_init_fn
            path = os.path.join(str(a.writer.dir), f"rank{a.rank}.{SUFFIX}")
            self.worker_init_fn = WorkerProbe(job_fn, path, a.worker_iterators)
            try:
                return orig(self)
            finally:
                self.worker_init_fn = job_fn

        return _get_iterator

    _wrap(dl_mod.DataLoader, "_get_iterator", "workers.get_iterator", make_get_iterator)


def uninstall() -> None:
    """Take this patch's wrapper back out."""
    rt.undo("workers")

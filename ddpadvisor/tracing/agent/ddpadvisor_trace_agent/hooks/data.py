"""Hooks into torch: BatchSampler indices, DistributedSampler.set_epoch and DataLoader fetches."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .. import runtime as rt
from ..core import Agent, _rng_digest, _subset
from ..runtime import INDEX_CHUNK_BATCHES, RNG_FETCHES_PER_ITERATOR, _busy, _wrap


def install() -> None:
    from torch.utils.data import dataloader as dl_mod
    from torch.utils.data import distributed as dist_mod
    from torch.utils.data import sampler as sampler_mod

    def make_batch_iter(orig: Any) -> Any:
        def __iter__(self: Any) -> Iterator[Any]:
            a = rt.AGENT
            if a is None or not a.writer.mine:
                yield from orig(self)
                return
            it = orig(self)
            state = a.safe("sampler", _epoch_start, a, self)
            chunk: list[int] = []
            batches = 0
            try:
                for batch in it:
                    if state is not None:
                        try:
                            chunk.extend(int(i) for i in batch)
                        except (TypeError, ValueError):
                            state = None
                        batches += 1
                        if batches % INDEX_CHUNK_BATCHES == 0:
                            a.safe("sampler", _write_indices, a, state, chunk, False)
                            chunk = []
                    yield batch
            finally:
                if state is not None:
                    a.safe("sampler", _write_indices, a, state, chunk, True)

        return __iter__

    _wrap(sampler_mod.BatchSampler, "__iter__", "batch_sampler_iter", make_batch_iter)

    def make_set_epoch(orig: Any) -> Any:
        def set_epoch(self: Any, epoch: int) -> Any:
            a = rt.AGENT
            if a is not None:
                a.set_epoch_calls.setdefault(id(self), []).append(int(epoch))
                a.safe("sampler", a.record, {"k": "set_epoch", "epoch": int(epoch), "s": a.step})
            return orig(self, epoch)

        return set_epoch

    _wrap(dist_mod.DistributedSampler, "set_epoch", "set_epoch", make_set_epoch)

    base_iter = getattr(dl_mod, "_BaseDataLoaderIter", None)
    if base_iter is None:
        return

    def make_next(orig: Any) -> Any:
        def __next__(self: Any) -> Any:
            a = rt.AGENT
            if a is None or not a.active or _busy():
                return orig(self)
            n = getattr(self, "_ddpadvisor_fetches", 0)
            self._ddpadvisor_fetches = n + 1
            if n == 0:
                a.safe("sampler", _iterator_record, a, self)
            if n >= RNG_FETCHES_PER_ITERATOR or "rng" in a.disabled:
                return orig(self)
            before = a.safe("rng", _rng_digest)
            out = orig(self)
            after = a.safe("rng", _rng_digest)
            if before is not None and after is not None:
                a.window.rng.append([n, before, after])
            return out

        return __next__

    _wrap(base_iter, "__next__", "loader_next", make_next)


def _iterator_record(a: Agent, it: Any) -> None:
    a.record(
        {
            "k": "iter",
            "workers": int(getattr(it, "_num_workers", 0)),
            "base_seed": getattr(it, "_base_seed", None),
            "s": a.step,
        }
    )


def _epoch_start(a: Agent, batch_sampler: Any) -> dict[str, Any]:
    sampler = getattr(batch_sampler, "sampler", None)
    sid = a.sampler_ids.setdefault(id(sampler), len(a.sampler_ids))
    a.iterations += 1
    rec: dict[str, Any] = {
        "k": "epoch",
        "it": a.iterations,
        "sampler": sid,
        "cls": type(sampler).__name__,
        "bs": getattr(batch_sampler, "batch_size", None),
        "s": a.step,
    }
    source = getattr(sampler, "dataset", None)
    if source is None:
        source = getattr(sampler, "data_source", None)
    try:
        rec["dataset_len"] = len(source if source is not None else sampler)  # type: ignore[arg-type]
    except TypeError:
        rec["dataset_len"] = None
    for attr in ("seed", "epoch", "shuffle", "num_replicas", "rank", "drop_last"):
        value = getattr(sampler, attr, None)
        if isinstance(value, (bool, int, float, str)):
            rec[attr] = value
    if "shuffle" not in rec:
        rec["shuffle"] = type(sampler).__name__ in ("RandomSampler", "SubsetRandomSampler")
    rec["set_epoch_calls"] = a.set_epoch_calls.get(id(sampler), [])[-8:]
    a.record(rec)
    return {"it": a.iterations, "part": 0, "total": rec["dataset_len"] or 0}


def _write_indices(a: Agent, state: dict[str, Any], chunk: list[int], end: bool) -> None:
    kept, modulus = _subset(chunk, int(state["total"]))
    rec: dict[str, Any] = {"k": "idx", "it": state["it"], "part": state["part"], "idx": kept}
    if modulus > 1:
        rec["mod"] = modulus
    if end:
        rec["end"] = True
    state["part"] += 1
    a.record(rec)


def uninstall() -> None:
    """Take this patch's wrappers and hooks back out."""
    rt.undo("data")

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
            if a is None or not a.writer.mine or a.batch_depth:
                # inside another batch sampler's iteration (accelerate's BatchSamplerShard
                # draws from the user's BatchSampler and keeps this rank's share): the outer
                # one records what this rank really reads
                yield from orig(self)
                return
            it = orig(self)
            state = a.safe("sampler", _epoch_start, a, self)
            chunk: list[int] = []
            batches = 0
            try:
                while True:
                    a.batch_depth += 1
                    try:
                        batch = next(it)
                    except StopIteration:
                        break
                    finally:
                        a.batch_depth -= 1
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

    base = sampler_mod.BatchSampler
    _wrap(base, "__iter__", "batch_sampler_iter", make_batch_iter)

    def wrap_subclass(cls: type) -> None:
        """A BatchSampler subclass with its own ``__iter__`` (a framework's sharding batch
        sampler, a bucketing sampler) is recorded like the base class."""
        if "__iter__" in vars(cls):
            _wrap(
                cls,
                "__iter__",
                f"batch_sampler_iter.{cls.__module__}.{cls.__qualname__}",
                make_batch_iter,
            )

    def subclasses(cls: type) -> list[type]:
        out: list[type] = []
        sub: type
        for sub in cls.__subclasses__():
            out += [sub, *subclasses(sub)]
        return out

    for cls in subclasses(base):
        wrap_subclass(cls)
    had_hook = "__init_subclass__" in vars(base)
    original_hook = vars(base).get("__init_subclass__")

    def __init_subclass__(cls: type, **kwargs: Any) -> None:
        super(base, cls).__init_subclass__(**kwargs)  # type: ignore[misc]
        a = rt.AGENT
        if a is not None:
            a.safe("sampler", wrap_subclass, cls)

    base.__init_subclass__ = classmethod(__init_subclass__)  # type: ignore[assignment]

    def restore_hook() -> None:
        if had_hook:
            base.__init_subclass__ = original_hook  # type: ignore[assignment]
        else:
            del base.__init_subclass__

    rt.on_undo(restore_hook)

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
    inner = getattr(batch_sampler, "batch_sampler", None)  # a batch sampler wrapping another
    sampler = getattr(batch_sampler, "sampler", None)
    if sampler is None and inner is not None:
        sampler = getattr(inner, "sampler", None)
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
    shards = getattr(batch_sampler, "num_processes", None)
    if inner is not None and isinstance(shards, int) and not isinstance(shards, bool):
        # the indices recorded are this rank's share of the inner batch sampler's batches
        rec["shard"] = type(batch_sampler).__name__
        rec["shards"] = shards
        for attr in ("process_index", "split_batches", "even_batches"):
            value = getattr(batch_sampler, attr, None)
            if isinstance(value, (bool, int)):
                rec[attr] = value
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

"""Hooks into torch: BatchSampler indices, DistributedSampler.set_epoch and DataLoader fetches."""

from __future__ import annotations

import hashlib
import random
import sys
import types
from collections.abc import Iterator
from typing import Any

import torch

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
                self._ddpadvisor_gens = a.safe("rng", _own_generators, self, sys._getframe(1))
            if n >= RNG_FETCHES_PER_ITERATOR or "rng" in a.disabled:
                return orig(self)
            gens = getattr(self, "_ddpadvisor_gens", None) or []
            before = a.safe("rng", _rng_digest)
            if before is not None and gens:
                before += a.safe("rng", _own_digests, gens) or []
            out = orig(self)
            after = a.safe("rng", _rng_digest)
            if after is not None and gens:
                after += a.safe("rng", _own_digests, gens) or []
            if before is not None and after is not None and len(before) == len(after):
                a.window.rng.append([n, before, after])
            return out

        return __next__

    _wrap(base_iter, "__next__", "loader_next", make_next)


MAX_OWN_GENERATORS = 4


def _is_generator(x: Any) -> bool:
    """A random generator object the job made itself (not a library's global one)."""
    if isinstance(x, torch.Generator):
        return x is not torch.default_generator
    if isinstance(x, random.Random):
        return x is not getattr(random, "_inst", None)
    cls = type(x)
    if cls.__module__.startswith("numpy.random") and cls.__name__ in ("Generator", "RandomState"):
        np_random = getattr(sys.modules.get("numpy"), "random", None)
        return x is not getattr(getattr(np_random, "mtrand", None), "_rand", None)
    return False


def _own_generators(it: Any, caller: Any) -> list[Any]:
    """Generators the job made itself and draws from around its batches: held by the dataset,
    the collate function or their transforms (two attribute levels down), or by the loop that
    iterates (the calling frames' local and module-level names). Found once per iterator."""
    found: list[Any] = []

    def take(x: Any) -> None:
        if len(found) < MAX_OWN_GENERATORS and _is_generator(x) and all(x is not f for f in found):
            found.append(x)

    def walk(obj: Any, depth: int) -> None:
        attrs = getattr(obj, "__dict__", None)
        if not isinstance(attrs, dict) or isinstance(obj, (type, types.ModuleType)):
            return
        for v in list(attrs.values())[:64]:
            items = list(v[:8]) if isinstance(v, (list, tuple)) else [v]
            for x in items:
                if _is_generator(x):
                    take(x)
                elif depth < 2 and not isinstance(x, (torch.Tensor, torch.nn.Module)):
                    walk(x, depth + 1)

    walk(getattr(it, "_dataset", None), 0)
    walk(getattr(it, "_collate_fn", None), 0)
    frame = caller
    for _ in range(3):
        if frame is None:
            break
        for scope in (frame.f_locals, frame.f_globals):
            for v in list(scope.values())[:256]:
                take(v)
        frame = frame.f_back
    return found


def _own_digests(gens: list[Any]) -> list[str]:
    """A digest of each generator's state, in the order found."""
    out = []
    for g in gens:
        if isinstance(g, torch.Generator):
            state = g.get_state()
            raw = state.numpy().tobytes() if "numpy" in sys.modules else bytes(rt.tolist(state))
        elif isinstance(g, random.Random):
            raw = repr(g.getstate()[1]).encode()
        elif hasattr(g, "bit_generator"):
            raw = repr(g.bit_generator.state).encode()
        else:
            st = g.get_state()
            raw = st[1].tobytes() + repr(st[2:]).encode()
        out.append(hashlib.blake2b(raw, digest_size=8).hexdigest())
    return out


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

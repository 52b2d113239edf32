"""Random generators: seeds at wrapping and augmentation draws per batch."""

from __future__ import annotations

import itertools
from typing import Any

from ddpadvisor.evidence.trace.common import _odd_ranks, _ranks_text
from ddpadvisor.evidence.trace.context import Context


class RngReader(Context):
    """Random generators: seeds at wrapping and augmentation draws per batch."""

    def rng(self) -> None:
        if len(self.ranks) < 2:
            return
        raw = {t.rank: (t.first("wrap") or {}).get("seeds") for t in self.ranks}
        seeds: dict[int, dict[str, Any]] = {r: v for r, v in raw.items() if isinstance(v, dict)}
        if len(seeds) == len(raw) and all(v.get("torch") for v in seeds.values()):
            torch_states = {r: v["torch"] for r, v in seeds.items()}
            odd = _odd_ranks(torch_states)
            others = [
                name
                for name in ("python", "numpy")
                if all(name in v for v in seeds.values())
                and _odd_ranks({r: v[name] for r, v in seeds.items()})
            ]
            detail = (
                "the torch generator is in the same state on every rank when the model is wrapped"
                if not odd
                else f"the torch generator differs on {_ranks_text(odd)} when the model is wrapped"
            )
            if others:
                detail += f" ({' and '.join(others)} generators differ across ranks)"
            self.add("rank_seeds_identical", not odd, detail=detail)
        self._main_process_draws()
        self._worker_draws()

    def _main_process_draws(self) -> None:
        """augmentation_rng_identical_across_ranks from the main process's generators around
        each batch fetch (hooks/data.py)."""
        # Per batch fetch: each generator's state before and after (torch, python, numpy).
        # Generators from index 3 on are the job's own (hooks/data.py), found per iterator.
        fetches: dict[int, dict[tuple[int, int], tuple[list[str], list[str]]]] = {}
        number: dict[int, dict[tuple[int, int], Any]] = {}  # the fetch's number in its iterator
        for t in self.ranks:
            table = {}
            numbers = {}
            for r in t.steps.values():
                for i, entry in enumerate(r.get("rng") or []):
                    if isinstance(entry, list) and len(entry) == 3 and isinstance(entry[1], list):
                        table[(r["s"], i)] = (entry[1], entry[2])
                        numbers[(r["s"], i)] = entry[0]
            fetches[t.rank] = table
            number[t.rank] = numbers
        keys = set.intersection(*(set(v) for v in fetches.values())) if fetches else set()

        def drawn(key: tuple[int, int]) -> list[tuple[int, int]]:
            """(generator, 1): advanced by every rank while fetching this batch; (generator, 0):
            a generator of the job's own (index 3 on) advanced by every rank in the loop since
            the previous fetch. The state compared across ranks: after the fetch, or before it."""
            n = min(len(fetches[r][key][0]) for r in fetches)
            out = [
                (g, 1)
                for g in range(n)
                if all(fetches[r][key][0][g] != fetches[r][key][1][g] for r in fetches)
            ]
            prev = {r: previous[r].get(key) for r in fetches}
            for g in range(3, n):
                if all(
                    p is not None and len(p) > g and p[g] != fetches[r][key][0][g]
                    for r, p in prev.items()
                ):
                    out.append((g, 0))
            return out

        # each rank's generator states after its previous fetch from the same iterator
        previous: dict[int, dict[tuple[int, int], list[str]]] = {}
        for rank, table in fetches.items():
            order = sorted(table)
            n = number[rank]
            previous[rank] = {
                k: table[p][1]
                for p, k in itertools.pairwise(order)
                if isinstance(n[k], int) and n[p] == n[k] - 1
            }

        first = min((k[0] for k in keys), default=0)
        keys = {k for k in keys if k[0] != first or k[1] > 0}  # a sampler's seed draw comes first
        draws = {k: drawn(k) for k in keys}
        draws = {k: g for k, g in draws.items() if g}
        if not keys or len(draws) < max(2, len(keys) // 2):
            return
        same = [
            k
            for k, gens in draws.items()
            if all(len({fetches[r][k][phase][g] for r in fetches}) == 1 for g, phase in gens)
        ]
        identical = len(same) >= 0.9 * len(draws)
        at = min(same) if same else None
        self.add(
            "uses_random_augmentation",
            True,
            detail=f"every rank drew random numbers around {len(draws)} of {len(keys)} batch "
            "fetches (the data pipeline, or the loop from a generator of its own)",
        )
        self.add(
            "augmentation_rng_identical_across_ranks",
            identical,
            where=f"step {at[0]}" if identical and at else None,
            detail=f"random numbers were drawn around {len(draws)} batch fetches (by the data "
            "pipeline, or by the loop from a generator of its own) and every rank's generators "
            f"were in the same state after {len(same)} of them"
            if identical
            else None,
        )

    def _worker_draws(self) -> None:
        """augmentation_rng_identical_across_ranks from the DataLoader workers' generators
        (hooks/workers.py): worker k of the i-th iterator with workers, on every rank, before
        its first fetch that draws random numbers on every rank. The same state there on all
        ranks is one stream replayed by all (whatever the samples); different states are
        streams of their own. Stated true over the main process's reading (a pipeline whose
        randomness lives in its workers draws nothing in the main process), false only where
        that reading said nothing."""
        per_rank: dict[int, dict[tuple[int, int, int], tuple[list[str], list[str]]]] = {}
        for t in self.ranks:
            table = {}
            for r in t.kind("wfetch"):
                b, a = r.get("b"), r.get("a")
                if isinstance(b, list) and isinstance(a, list) and len(a) == len(b):
                    table[(int(r["it"]), int(r["w"]), int(r["n"]))] = (b, a)
            per_rank[t.rank] = table
        if len(per_rank) < 2 or not all(per_rank.values()):
            return
        common = set.intersection(*(set(v) for v in per_rank.values()))
        compared = same = 0
        where = None
        for it, w in sorted({(k[0], k[1]) for k in common}):
            for n in sorted(k[2] for k in common if k[:2] == (it, w)):
                rows = [per_rank[r][(it, w, n)] for r in per_rank]
                width = min(len(b) for b, _ in rows)
                drew = [g for g in range(width) if all(b[g] != a[g] for b, a in rows)]
                if not drew:
                    continue
                compared += 1
                if all(len({b[g] for b, _ in rows}) == 1 for g in drew):
                    same += 1
                    where = where or f"worker {w} of iterator {it}"
                break  # the first fetch that draws on every rank decides for this worker
        if compared < 2:
            return
        self.add(
            "uses_random_augmentation",
            True,
            detail=f"{compared} DataLoader workers drew random numbers while fetching on every rank",
        )
        identical = same >= 0.9 * compared
        if identical:
            self.add(
                "augmentation_rng_identical_across_ranks",
                True,
                where=where,
                detail=f"{same} of {compared} DataLoader workers drew their random numbers from "
                "a generator in the same state on every rank (the same worker number replays "
                "one stream on all ranks)",
            )
        elif "augmentation_rng_identical_across_ranks" not in self.facts.out:
            self.add(
                "augmentation_rng_identical_across_ranks",
                False,
                detail=f"the DataLoader workers' random streams differ across ranks "
                f"({compared - same} of {compared} compared)",
            )

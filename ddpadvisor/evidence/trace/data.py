"""Data: batches across ranks, token counts, samplers and epochs."""

from __future__ import annotations

import bisect
import itertools
import json
from collections.abc import Callable

from ddpadvisor.evidence.trace.common import _covers, _fmt, _odd_ranks
from ddpadvisor.evidence.trace.context import Context
from ddpadvisor.evidence.trace.load import RankTrace, Record


class DataReader(Context):
    """Data: batches across ranks, token counts, samplers and epochs."""

    def data(self) -> None:
        self._batches()
        self._tokens()
        self._samplers()
        self._loaders()

    def _loaders(self) -> None:
        """batches_from_dataloader: whether any rank took batches from a torch DataLoader (its
        iterator's first fetch is recorded), said only of a job that took optimizer steps with
        the loader hook working on every rank. False: the batches came from elsewhere - drawn
        by a random generator (nanoGPT's get_batch, synthetic data, rollouts) or sliced by
        hand - so no sampler decides what each rank reads."""
        if not self.common_steps:
            return
        if any(e.get("part") == "sampler" for t in self.ranks for e in t.kind("agent_error")):
            return
        fed = [t.rank for t in self.ranks if t.first("iter") is not None]
        if fed:
            self.add("batches_from_dataloader", True, detail=f"rank {fed[0]} iterated a DataLoader")
        else:
            self.add(
                "batches_from_dataloader",
                False,
                detail=f"no rank iterated a torch DataLoader in {len(self.common_steps)} steps",
            )

    def _batches(self) -> None:
        """Batches one rank fed that another rank fed too, at the same step or at any other
        step of the same epoch (a rank reading another rank's batches one step later is as
        wrong). Across epochs a batch may change hands: a sampler that deals fixed batches
        (length buckets) to the ranks in a new order every epoch gives rank 0 this epoch a
        batch rank 1 had in the last."""
        if len(self.ranks) < 2:
            return
        epoch_of = {t.rank: self._epoch_of_steps(t) for t in self.ranks}
        # batch digest -> rank -> epoch -> first step
        seen: dict[str, dict[int, dict[int, int]]] = {}
        for t in self.ranks:
            for s, rec in sorted(t.steps.items()):
                for d in rec.get("dig") or []:
                    by_epoch = seen.setdefault(json.dumps(d), {}).setdefault(t.rank, {})
                    by_epoch.setdefault(epoch_of[t.rank](s), s)
        compared = 0
        dup = []
        for s in self.common_steps:
            digests = {t.rank: t.steps[s].get("dig") for t in self.ranks}
            if any(not d for d in digests.values()):
                continue
            compared += 1
            pairs = []
            for b, ds in sorted(digests.items()):
                mine = epoch_of[b](s)
                for d in ds or []:
                    others = {
                        a: eps[mine]
                        for a, eps in seen.get(json.dumps(d), {}).items()
                        if a != b and mine in eps
                    }
                    if others:
                        a = min(others)
                        pairs.append((min(a, b), max(a, b), others[a]))
                        break
            if pairs:
                a, b, at = pairs[0]
                dup.append((s, (a, b), at))
        if not compared:
            return
        share = len(dup) / compared
        if share >= 0.1:
            s, (a, b), at = dup[0]
            offset = "" if at == s else f"; one rank fed it at step {at}, the other at step {s}"
            self.add(
                "batches_duplicated_across_ranks",
                True,
                where=f"rank {b} step {s}",
                detail=f"ranks {a} and {b} fed identical batches at {len(dup)} of {compared} steps "
                f"(first: step {s}{offset})",
            )
        else:
            self.add(
                "batches_duplicated_across_ranks",
                False,
                detail=f"no shared batch in {compared} steps",
            )

    def _epoch_of_steps(self, t: RankTrace) -> Callable[[int], int]:
        """Step -> the number of the training sampler's epoch it was taken in. With no known
        training sampler (a batch sampler of the job's own), every DataLoader iterator begins
        a span (an evaluation loader's too: that only splits an epoch); with none, all steps
        are one span (batches drawn by hand)."""
        sid = self._train_sampler(t)
        starts = sorted(
            int(e.get("s") or 0) for e in t.epochs if sid is not None and e.get("sampler") == sid
        )
        if not starts:
            starts = sorted(int(r.get("s") or 0) for r in t.kind("iter"))

        def epoch(step: int) -> int:
            # an epoch whose iteration began after k steps holds steps k+1 on
            return max(0, bisect.bisect_left(starts, step) - 1)

        return epoch

    def _tokens(self) -> None:
        """Per-rank target-token counts per step: what the classification losses kept (``ce``:
        targets not equal to ``ignore_index``), else the labels (!= -100) or attention mask of
        the forward inputs (``tok``). From the losses also whether the batches hold variable
        numbers of targets, and whether a per-rank mean over unequal counts reached backward."""
        if len(self.ranks) < 2:
            return
        ce = all(t.steps[s].get("ce") for t in self.ranks for s in self.common_steps)
        ratios = []
        for s in self.common_steps:
            if ce:
                counts = [sum(c[0] for c in t.steps[s]["ce"]) for t in self.ranks]
            else:
                counts = [sum(t.steps[s].get("tok") or []) for t in self.ranks]
                if not all(t.steps[s].get("tok") for t in self.ranks):
                    continue
            if all(isinstance(c, (int, float)) for c in counts):
                ratios.append((max(counts) / max(min(counts), 1), s))
        if len(ratios) < 3:
            return
        ordered = sorted(r for r, _ in ratios)
        p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
        worst, at = max(ratios)
        what = "targets the loss kept" if ce else "target tokens"
        self.add(
            "token_count_imbalance",
            p90,
            where=f"step {at}" if worst > 1 else None,
            detail=f"per-rank {what} differ up to {_fmt(worst)}x (step {at}); "
            f"90th percentile {_fmt(p90)}x over {len(ratios)} steps",
        )
        if ce:
            self._loss_normaliser(worst, at, p90)

    def _micro_spread(self) -> float | None:
        """How much more a target counts in one micro-batch than in another of the same
        optimizer step when each micro-batch is divided by its own count (90th percentile over
        steps and ranks of the largest count over the smallest; None without accumulation)."""
        spreads = []
        for t in self.ranks:
            for s in self.common_steps:
                kept = [c[0] for c in t.steps[s]["ce"]]
                if len(kept) >= 2 and all(isinstance(k, int) for k in kept):
                    spreads.append(max(kept) / max(min(kept), 1))
        if not spreads:
            return None
        spreads.sort()
        return spreads[min(len(spreads) - 1, int(0.9 * len(spreads)))]

    def _loss_normaliser(self, worst: float, at: int, p90: float) -> None:
        """From the losses' own calls: targets ignored (padding) and counts that vary make
        variable-length batches; a ``reduction="mean"`` loss over counts that differ between
        ranks, reaching backward as it is (or over the accumulation count), is a per-rank
        mean that DDP then averages with equal weight per rank. How unequal that makes a
        target's weight is measured too (``rank_token_weight_ratio``, and
        ``micro_batch_token_weight_ratio`` when each micro-batch of a window is its own mean)."""
        calls = [c for t in self.ranks for s in self.common_steps for c in t.steps[s]["ce"]]
        if not all(isinstance(c[0], int) and isinstance(c[1], int) for c in calls):
            return
        padded = sum(1 for c in calls if c[0] < c[1])
        varies = len({c[0] for c in calls}) > 1
        if padded and varies:
            self.add(
                "variable_length_sequences",
                True,
                detail=f"{padded} of {len(calls)} loss calls ignored some targets "
                "(ignore_index) and the kept counts vary",
            )
        elif not padded:
            self.add(
                "variable_length_sequences",
                False,
                detail=f"every one of {len(calls)} loss calls kept all its targets",
            )
            return
        # an unreduced loss ("none") summed by the loop, then divided, reads as a summed one;
        # its mean (or any reduction by a count tensor) leaves no constant divisor to read
        if all(c[2] in ("s", "n") for c in calls):
            self._summed_loss_divisor(p90)
            return
        if worst <= 1 or any(c[2] != "m" for c in calls):
            return
        steps = [t.steps[s] for t in self.ranks for s in self.common_steps]
        if any(any(r.get("tdiv") or []) for r in steps):
            return  # divided by a count tensor afterwards: maybe a global one
        accum = max(1, self.accum)
        plain = all(
            isinstance(f, (int, float)) and (abs(f - 1) < 1e-6 or abs(f * accum - 1) < 1e-6)
            for r in steps
            for f in r.get("fac") or []
        )
        if plain:
            self.add(
                "loss_normalised_by_global_tokens",
                False,
                where=f"step {at}",
                detail="each rank's loss is a mean over its own kept targets "
                f"(reduction='mean'); the counts differ between ranks up to {_fmt(worst)}x "
                f"(step {at}), and DDP averages the ranks' gradients with equal weight",
            )
            self._weight_ratio("rank_token_weight_ratio", p90, "ranks")
            micro = self._micro_spread()
            if micro is not None:
                self._weight_ratio("micro_batch_token_weight_ratio", micro, "micro-batches")

    def _weight_ratio(self, fact: str, ratio: float, between: str) -> None:
        self.add(
            fact,
            round(ratio, 4),
            detail=f"a target weighs up to {_fmt(ratio)}x more on some {between} than on "
            "others of the same optimizer step (90th percentile over steps)",
        )

    def _summed_loss_divisor(self, p90: float) -> None:
        """A summed token loss divided by a constant before backward (``fac``). By the
        targets kept on all ranks over the accumulation window times the world size (which the
        HF Trainer multiplies back) it is a global normalisation; without that factor the
        gradient averaging divides by the world size again (unless a comm hook reduces); by
        the targets of this micro-batch alone (on all ranks) while the window holds several,
        a per-micro-batch one; by this rank's own count, a per-rank one. A reading that fits
        two of these at a step says nothing there; a count on a GPU is no constant
        (``tdiv``): nothing is said."""
        world = len(self.ranks)
        verdicts: list[str | None] = []
        micro_spreads: list[float] = []
        windowed = False  # some step's window held several micro-batches
        for s in self.common_steps:
            per_rank = [t.steps[s]["ce"] for t in self.ranks]
            factors = self.r0.steps[s].get("fac") or []
            if len({len(c) for c in per_rank}) != 1 or len(per_rank[0]) != len(factors):
                continue
            kept = [[c[0] for c in calls] for calls in per_rank]
            mine = kept[self.ranks.index(self.r0)]
            n = len(mine)
            windowed = windowed or n > 1
            micro_counts = [sum(k[i] for k in kept) for i in range(n)]
            window = sum(micro_counts)
            for i, f in enumerate(factors):
                if not isinstance(f, (int, float)) or f <= 0:
                    continue
                by = {
                    "window": _near(f * window, world),
                    "window_only": world > 1 and _near(f * window, 1),
                    "micro": n > 1
                    and any(_near(f * micro_counts[i] * a, m) for a in (1, n) for m in (1, world)),
                    "own": _near(f * sum(mine), 1),
                    # this micro-batch's own count on this rank (divided by the window's
                    # length too where the loop or the Trainer divides for accumulation)
                    "own_micro": n > 1 and any(_near(f * c, 1) for c in (mine[i], mine[i] * n)),
                }
                if n == 1:
                    by["own"] = by["own"] or _near(f * mine[i], 1)
                fits = [k for k, v in by.items() if v]
                if len(fits) != 1:
                    # two micro-batches on two ranks: this micro-batch's count on all ranks and
                    # this rank's count over the window can be the same number; says nothing
                    continue
                verdicts.append(fits[0])
                if fits[0] == "micro" and min(micro_counts) > 0:
                    micro_spreads.append(max(micro_counts) / min(micro_counts))
        if len(verdicts) < 3 or len(set(verdicts)) != 1 or verdicts[0] is None:
            return
        if verdicts[0] in ("window", "window_only"):
            detail = "the summed loss is divided by the targets kept on all ranks"
            self.add("loss_normalised_by_global_tokens", True, detail=detail)
            self._weight_ratio("rank_token_weight_ratio", 1.0, "ranks")
            if windowed:  # one count for the whole window: its micro-batches weigh alike
                self._weight_ratio("micro_batch_token_weight_ratio", 1.0, "micro-batches")
            hook = self.facts.out.get("uses_comm_hook")
            if verdicts[0] == "window_only" and not (hook is not None and hook.value):
                self.add(
                    "loss_divided_by_world_size",
                    True,
                    detail="the summed loss is divided by the targets kept on all ranks and "
                    f"not multiplied back by the world size ({world}): the gradient averaging "
                    "divides by the world size a second time",
                )
            elif verdicts[0] == "window" and "loss_divided_by_world_size" not in self.facts.out:
                # the whole constant before backward is world / (the window's targets on all
                # ranks): the gradient averaging's division makes it the global token mean
                self.add(
                    "loss_divided_by_world_size",
                    False,
                    detail="the summed loss is divided by the targets kept on all ranks and "
                    f"multiplied by the world size ({world}): after the gradient averaging, "
                    "the global token mean",
                )
            return
        if verdicts[0] == "micro":
            detail = (
                "the summed loss of each micro-batch is divided by that micro-batch's own "
                "count of kept targets, not the accumulation window's"
            )
            self.add("loss_normalised_by_global_tokens", False, detail=detail)
            # each micro-batch's count over all ranks: the ranks' targets weigh alike
            self._weight_ratio("rank_token_weight_ratio", 1.0, "ranks")
            if micro_spreads:  # none where every window held a micro-batch with no target
                micro_spreads.sort()
                at90 = min(len(micro_spreads) - 1, int(0.9 * len(micro_spreads)))
                self._weight_ratio(
                    "micro_batch_token_weight_ratio", micro_spreads[at90], "micro-batches"
                )
            return
        if verdicts[0] == "own_micro":
            detail = (
                "the summed loss of each micro-batch is divided by this rank's own count of "
                "kept targets in that micro-batch: neither the ranks nor the micro-batches of "
                "a step weigh their targets alike"
            )
            self.add("loss_normalised_by_global_tokens", False, detail=detail)
            self._weight_ratio("rank_token_weight_ratio", p90, "ranks")
            micro = self._micro_spread()
            if micro is not None:
                self._weight_ratio("micro_batch_token_weight_ratio", micro, "micro-batches")
            return
        detail = "the summed loss is divided by this rank's own count of kept targets"
        self.add("loss_normalised_by_global_tokens", False, detail=detail)
        self._weight_ratio("rank_token_weight_ratio", p90, "ranks")
        if windowed:  # this rank's count over its whole window: its micro-batches weigh alike
            self._weight_ratio("micro_batch_token_weight_ratio", 1.0, "micro-batches")

    def _samplers(self) -> None:
        per_rank: dict[int, list[Record]] = {}
        cls = None
        for t in self.ranks:
            sid = self._train_sampler(t)
            if sid is None:
                continue
            eps = sorted(
                (e for e in t.epochs if e.get("sampler") == sid), key=lambda e: e.get("it", 0)
            )
            if eps:
                per_rank[t.rank] = eps
                cls = eps[0].get("cls")
        if not per_rank:
            return
        distributed = cls == "DistributedSampler" or any(
            "num_replicas" in e for eps in per_rank.values() for e in eps
        )
        shuffles = any(e.get("shuffle") for eps in per_rank.values() for e in eps)
        overlap = self._shard_overlap(per_rank)
        # a batch sampler that keeps this rank's share of another one's batches (accelerate's
        # BatchSamplerShard): the indices recorded are already per rank, the inner sampler is
        # the same on every rank by design
        shard = next((e["shard"] for eps in per_rank.values() for e in eps if e.get("shard")), None)
        if shard is not None and not distributed and overlap is not None:
            disjoint = overlap[0] <= self._shard_padding(per_rank)
            self.add(
                "uses_distributed_sampler",
                disjoint,
                detail=f"{shard} splits the batches by rank"
                if disjoint
                else f"{shard} on every rank, yet the ranks read the same samples",
            )
        elif distributed:
            self.add("uses_distributed_sampler", True, detail=f"{cls}")
            seeds = {r: eps[0].get("seed") for r, eps in per_rank.items() if "seed" in eps[0]}
            if len(seeds) >= 2:
                odd = _odd_ranks(seeds)
                self.add(
                    "sampler_seed_rank_dependent",
                    bool(odd),
                    where=f"rank {odd[0]}" if odd else None,
                    detail="DistributedSampler seed per rank: "
                    + ", ".join(f"rank {r}: {v}" for r, v in sorted(seeds.items()))
                    if odd
                    else None,
                )
        elif overlap is not None:
            disjoint = overlap[0] == 0
            self.add(
                "uses_distributed_sampler",
                disjoint,
                detail=None
                if disjoint
                else f"{cls} on every rank: nothing splits the data by rank",
            )
        if overlap is not None:
            count, share, a, b, epoch_no = overlap
            # DistributedSampler repeats fewer than W samples to pad; a sharding batch sampler
            # (accelerate's even_batches) up to W batches
            padding = self._shard_padding(per_rank) if shard is not None else self.world
            shared = count > padding or (
                count > 0 and share > 0.05 and not distributed and shard is None
            )
            detail = None
            if shared:
                detail = (
                    f"ranks {a} and {b} read {share:.0%} the same samples in epoch {epoch_no}"
                    if share > 0.99
                    else f"ranks {a} and {b} shards share {count} indices ({share:.0%}) in epoch "
                    f"{epoch_no}"
                )
            self.add(
                "sampler_shards_overlap",
                shared,
                where=f"rank {b} epoch {epoch_no}" if shared else None,
                detail=detail,
            )
        if shuffles:
            self._epoch_order(per_rank, distributed)

    def _shard_padding(self, per_rank: dict[int, list[Record]]) -> int:
        """Samples a sharding batch sampler may hand to two ranks: with even_batches it loops
        back to the first batches to give every rank the same number of full batches."""
        bs = max((int(e.get("bs") or 1) for eps in per_rank.values() for e in eps), default=1)
        return self.world * bs

    def _shard_overlap(
        self, per_rank: dict[int, list[Record]]
    ) -> tuple[int, float, int, int, int] | None:
        """Worst pairwise index overlap between ranks in the same epoch ordinal."""
        if len(per_rank) < 2:
            return None
        worst = None
        n_epochs = min(len(eps) for eps in per_rank.values())
        ranks = sorted(per_rank)
        for e in range(n_epochs):
            sets = {r: set(per_rank[r][e]["indices"]) for r in ranks}
            for i, a in enumerate(ranks):
                for b in ranks[i + 1 :]:
                    if not sets[a] or not sets[b]:
                        continue
                    count = len(sets[a] & sets[b])
                    share = count / min(len(sets[a]), len(sets[b]))
                    if worst is None or share > worst[1]:
                        worst = (count, share, a, b, e + 1)
        return worst

    def _epoch_order(self, per_rank: dict[int, list[Record]], distributed: bool) -> None:
        compared = 0
        for rank, eps in sorted(per_rank.items()):
            full = [e for e in eps if _covers(e) and e["indices"]]
            for prev, cur in itertools.pairwise(full):
                compared += 1
                if prev["indices"] == cur["indices"]:
                    n = eps.index(cur) + 1
                    self.add(
                        "sampler_order_repeats_across_epochs",
                        True,
                        where=f"rank {rank} epoch {n}",
                        detail=f"epoch {n} order equals epoch {n - 1} (rank {rank})",
                    )
                    if distributed:
                        self._set_epoch(per_rank, repeats=True)
                    return
        if compared:
            self.add(
                "sampler_order_repeats_across_epochs",
                False,
                detail=f"{compared} epoch pairs differ",
            )
        if distributed:
            self._set_epoch(per_rank, repeats=False)

    def _set_epoch(self, per_rank: dict[int, list[Record]], repeats: bool) -> None:
        eps = [e for e in per_rank[min(per_rank)] if _covers(e)]
        if not eps:
            return
        calls = eps[-1].get("set_epoch_calls") or []
        values = [e.get("epoch") for e in eps]
        if len(eps) >= 2:
            changing = len(set(values)) > 1
            if changing:
                self.add("calls_set_epoch", True)
            else:
                detail = (
                    f"set_epoch was called with the same value {values[0]} every epoch"
                    if calls
                    else "DistributedSampler.set_epoch was never called"
                )
                self.add("calls_set_epoch", False, detail=f"{detail}: every epoch reuses one order")
        elif calls:
            self.add("calls_set_epoch", True)


def _near(x: float, target: float) -> bool:
    return abs(x - target) <= 1e-4 * max(1.0, abs(target))

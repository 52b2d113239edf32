"""Gradient synchronisation: steps without sync, no_sync windows, comm hooks, bypass."""

from __future__ import annotations

import statistics

from ddpadvisor.evidence.trace.common import _finite, _fmt
from ddpadvisor.evidence.trace.context import Context


class SyncReader(Context):
    """Gradient synchronisation: steps without sync, no_sync windows, comm hooks, bypass."""

    def sync(self) -> None:
        self._sync_present()
        if not self.ddp:
            return
        worst: tuple[int, int, list[int]] | None = None
        unsynced_final = []
        flag_late = 0
        nosync_forward = False
        bypass = []
        for t in self.ranks:
            steps = [r for r in t.steps.values() if r.get("syn")]
            never = [r["s"] for r in steps if not any(r["syn"])]
            if worst is None or len(never) > worst[0]:
                worst = (len(never), t.rank, never)
            for r in steps:
                if not r["syn"][-1]:
                    unsynced_final.append((t.rank, r["s"]))
                    flags = r.get("bflag") or []
                    if flags and flags[-1] and r.get("fflag"):
                        flag_late += 1
            nosync_forward = nosync_forward or any(
                f is False for r in t.steps.values() for f in r.get("fflag") or []
            )
            bypass += [
                (t.rank, r["s"], r["byp"], bool(r.get("bypi")))
                for r in t.steps.values()
                if r.get("byp")
            ]
        total = len(self.r0.steps)
        if worst is not None and total:
            count, rank, never = worst
            detail = None
            where = None
            if count:
                where = f"rank {rank} step {never[0]}"
                detail = (
                    f"{count} of {total} optimizer steps ran on gradients that no backward had "
                    f"all-reduced (first: step {never[0]})"
                )
            self.add("optimizer_steps_without_sync", count, where=where, detail=detail)
        # whether the last micro-batch synchronised describes DDP's reducer under no_sync;
        # an optimizer over parameters no wrapper holds never had one to miss
        if (
            total
            and any(r.get("syn") for r in self.r0.steps.values())
            and not self.counted_outside_ddp
        ):
            if unsynced_final:
                rank, step = unsynced_final[0]
                detail = (
                    f"the last backward before {len(unsynced_final)} optimizer step(s) did not "
                    f"synchronise gradients (first: rank {rank} step {step})"
                )
                if flag_late:
                    detail += (
                        "; require_backward_grad_sync was True at backward but False at forward: "
                        "DDP decides in forward"
                    )
                self.add(
                    "final_micro_step_synced",
                    False,
                    where=f"rank {rank} step {step}",
                    detail=detail,
                )
            else:
                self.add("final_micro_step_synced", True)
        self.add("uses_no_sync", nosync_forward)
        self._norm_ratio()
        hooks = [
            r.get("comm_hook") or "a built-in hook"
            for r in self._cfg()
            if r.get("comm_hook") or r.get("builtin_comm_hook")
        ]
        by_hand = sum(int(r.get("bigred") or 0) for r in self.r0.steps.values())
        if hooks:
            self.add(
                "uses_comm_hook", True, detail=f"DDP communication hook registered: {hooks[0]}"
            )
        elif by_hand:
            self.add(
                "uses_comm_hook",
                True,
                detail=f"{by_hand} large all_reduce calls inside training steps on top of DDP's own "
                "(gradients reduced by hand?)",
            )
        elif total:
            self.add("uses_comm_hook", False)
        if bypass:
            rank, step, _, _ = bypass[0]
            detail = (
                "training forwards ran through the inner module (or its parts), outside the "
                f"DDP wrapper ({sum(b[2] for b in bypass)} times; first at step {step})"
            )
            if any(b[3] for b in bypass):
                detail += (
                    "; some optimizer steps had gradients on the wrapped parameters with no "
                    "forward through the wrapper at all (a module compiled or called on its own)"
                )
            self.add("forward_bypasses_ddp", True, where=f"rank {rank} step {step}", detail=detail)
        elif total:
            self.add("forward_bypasses_ddp", False)

    def _sync_present(self) -> None:
        """gradient_sync_present: true with a DDP wrapper, sharded (FSDP) parameters or a
        DeepSpeed engine; false
        when neither exists and not one large collective ran in any traced step (an agent
        that counts them: format 3), so nothing can have carried gradients between ranks;
        unknown otherwise (a large all-reduce may be a sync by hand)."""
        steps = len(self.r0.steps)
        if self.world < 2 or not steps:
            return
        if self.ddp:
            stepped = self.counted_outside_ddp
            if stepped:
                self.add(
                    "gradient_sync_present",
                    False,
                    where=f"rank {self.r0.rank}",
                    detail=f"a model is wrapped in DDP, but the optimizer whose steps are "
                    f"counted steps {stepped} parameter(s) and no DDP wrapper holds any of "
                    "them: their gradients are never synchronised",
                )
                return
            self.add("gradient_sync_present", True, detail="the model is wrapped in DDP")
            return
        if self.sharded:
            self.add("gradient_sync_present", True, detail="parameters are sharded (FSDP)")
            return
        ds = self.deepspeed
        if ds is not None:
            self.add(
                "gradient_sync_present",
                True,
                detail=f"a DeepSpeed engine (ZeRO stage {ds.get('stage')}) reduces the gradients "
                "through its own communication layer",
            )
            return
        if not self.nothing_syncs:
            return
        self.add(
            "gradient_sync_present",
            False,
            where="every rank",
            detail=f"no rank wrapped a model in DDP or FSDP, and no large collective ran in "
            f"{steps} traced optimizer step(s): each process trained its own copy",
        )

    def _norm_ratio(self) -> None:
        """Post-sync norm over the mean of the ranks' pre-sync norms (<= 1 for an average)."""
        ratios = []
        for s in self.common_steps:
            recs = [t.steps[s] for t in self.ranks]
            pre = [r.get("pre") for r in recs]
            post = recs[0].get("post")
            pre_norms = [float(p) for p in pre if _finite(p) and p > 0]
            if len(pre_norms) < len(pre) or not _finite(post):
                continue
            ratios.append((float(post) / statistics.fmean(pre_norms), s))
        if len(ratios) < 3:
            return
        value = statistics.median(r for r, _ in ratios)
        detail = f"median over {len(ratios)} steps"
        if value >= 1.1:
            worst, at = max(ratios)
            detail = (
                f"the all-reduced gradient norm is {_fmt(value)}x the ranks' mean local norm "
                f"(up to {_fmt(worst)}x at step {at}): gradients are summed, not averaged"
            )
        self.add("synced_grad_norm_ratio", value, detail=detail)

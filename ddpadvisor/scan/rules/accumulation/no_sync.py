from __future__ import annotations

from ddpadvisor.scan import values as V
from ddpadvisor.scan.context import CondCtx, Event
from ddpadvisor.scan.library.views import SCRIPT, Sync
from ddpadvisor.scan.rules.base import RuleContext, cli_switched, is_rank_cond
from ddpadvisor.scan.rules.registry import not_in_excerpt, rule


@rule(
    "Whether micro-steps skip the gradient sync with no_sync() and the last one syncs.",
    facts={
        "uses_no_sync": not_in_excerpt(False),
        "final_micro_step_synced": not_in_excerpt(True),  # True also when no no_sync() is seen
    },
    shown_with={"final_micro_step_synced": "uses_no_sync"},
)
def no_sync(rc: RuleContext) -> None:
    a = rc.a
    fw = rc.framework
    sync = fw.sync() if fw is not None else SCRIPT
    if isinstance(sync, Sync):
        rc.say("uses_no_sync", sync.skips)
        rc.say("final_micro_step_synced", sync.last_synced)
        return
    acc = a.accum
    if acc.style == "framework" and _deepspeed_plugin(rc):
        # accelerate enters the engine's no_sync only below ZeRO-2, and a DeepSpeed engine
        # reduces (or keeps) gradients by its own rules: accumulate() says nothing of no_sync
        rc.warn(
            f"{acc.k_where}: accelerator.accumulate() under a DeepSpeedPlugin: no_sync is "
            "used only at ZeRO stage 0 or 1; not decided"
        )
        return
    if acc.style == "framework":
        # accumulate() enters no_sync only on the micro-steps before a boundary: with one
        # micro-batch per step it never does, so the count decides
        count: float | None = acc.k if acc.k is not None and not acc.k_default else None
        if count is None:
            count = rc.given_number("grad_accum_steps")
        if count is None:
            rc.warn(
                f"{acc.k_where}: accelerator.accumulate() skips the sync only when the run "
                "accumulates, and its count is not decided; uses_no_sync not decided"
            )
        elif count >= 2:
            rc.emit(
                "uses_no_sync",
                True,
                acc.k_where,
                "accelerator.accumulate() skips sync on non-final micro-steps",
            )
        else:
            rc.emit(
                "uses_no_sync",
                False,
                acc.k_where,
                "accelerator.accumulate() with one micro-batch per step syncs every backward",
            )
        rc.emit(
            "final_micro_step_synced",
            True,
            acc.k_where,
            "accelerator.accumulate() syncs the final micro-step",
        )
        return
    uses = [e for e in a.calls("no_sync")] + a.flag_events
    uses.sort(key=lambda e: e.seq)
    if uses:
        u = uses[0]
        how = "require_backward_grad_sync" if u.kind == "assign" else "no_sync()"
        if all(cli_switched(x) for x in uses):
            # ``if args.accum_freq > 1: train_accum(...)``: the run's flags decide.
            rc.warn(f"{u.where}: {how} only when a command-line option asks for it; not decided")
        elif (acc.k is None or acc.k_default) and all(_guarded(x) for x in uses):
            # ``with ddp_sync(model, sync=(i == rounds - 1))`` where the count of rounds is
            # not known: with one round per step, the branch that skips the sync never runs
            rc.warn(
                f"{u.where}: {how} only on the micro-steps an undecided test picks, and the "
                "accumulation count (which may be 1) is not decided; uses_no_sync not decided"
            )
        elif (
            (acc.k is None or acc.k_default)
            and rc.given_number("grad_accum_steps") == 1
            and all(_guarded(x) or _toggled(x) for x in uses)
        ):
            # ``model.require_backward_grad_sync = (micro_step == count - 1)`` with a count
            # the code derives (``total // (B * T * world_size)``) and the run's evidence
            # saying one micro-batch per step: the skipping side may never run
            rc.warn(
                f"{u.where}: {how} only on the micro-steps a test picks, and the run "
                "accumulates one micro-batch per step; uses_no_sync not decided"
            )
        else:
            rc.emit("uses_no_sync", True, u.where, f"{how} used ({u.where})")
    elif (
        a.ddps and a.main_backward is not None and not any(o.extra.get("deepspeed") for o in a.ddps)
    ):
        rc.emit("uses_no_sync", False, a.ddps[0].where, "no no_sync(): every backward all-reduces")
        if a.train_forwards:
            rc.emit(
                "final_micro_step_synced",
                True,
                a.train_forwards[0].where,
                "every micro-step synchronises (no no_sync)",
            )
        return
    else:
        return
    step = acc.step
    if step is not None and any(w.kind == V.CTX_NO_SYNC and w.cond is None for w in step.withs()):
        rc.emit(
            "final_micro_step_synced",
            False,
            step.where,
            f"optimizer.step() inside no_sync() ({step.where})",
        )
        return
    if acc.tail is not None:
        _tail_sync(rc, acc.tail)
        return
    win = a.window
    if win is None:
        rc.warn(f"{u.where}: no_sync() found but the accumulation window is not understood")
        return
    fwds = (
        [
            f
            for f in a.train_forwards
            if f.result is not None
            and any(t in ("route:ddp", "route:fsdp") for t in f.result.taint)
        ]
        if a.train_forwards
        else []
    )
    fwds = [f for f in fwds if a.in_window(f, win)]
    if not fwds:
        return
    bad: str | None = None
    for i in sorted(win.boundaries):
        ran = False
        running: list[Event] = []
        for f in fwds:
            runs = a.runs_at(f, i, win)
            if runs is None:
                rc.warn(f"{f.where}: cannot tell which micro-step this forward runs in")
                return
            if runs:
                running.append(f)
        for f in _last_per_model(running):
            ran = True
            synced, where = a.synced_at(f, i, win)
            if synced is None:
                rc.warn(f"{f.where}: cannot evaluate the no_sync condition")
                return
            if not synced:
                bad = where or f.where
        if not ran:
            return
    if bad is not None:
        rc.emit(
            "final_micro_step_synced",
            False,
            bad,
            f"the micro-step before optimizer.step() runs its forward without gradient sync ({bad})",
        )
    else:
        rc.emit(
            "final_micro_step_synced",
            True,
            fwds[0].where,
            "the last micro-step's forward and backward run outside no_sync",
        )


def _tail_sync(rc: RuleContext, tail: Event) -> None:
    """The last micro-step is written after the micro-batch loop: is its forward synced?"""
    a = rc.a
    fwd_seqs = [int(t.split(":", 1)[1]) for t in a.loss_of(tail).taint if t.startswith("fwdseq:")]
    fwd = a.by_seq.get(fwd_seqs[-1]) if fwd_seqs else None
    if fwd is None:
        return
    blocking = [w for w in fwd.withs() if w.kind == V.CTX_NO_SYNC]
    if any(w.cond is None for w in blocking):
        w = blocking[0]
        rc.emit(
            "final_micro_step_synced",
            False,
            f"{w.file}:{w.line}",
            f"the last micro-step also runs under no_sync ({w.file}:{w.line})",
        )
    elif blocking:
        rc.warn(f"{fwd.where}: conditional no_sync around the last micro-step; not decided")
    else:
        rc.emit(
            "final_micro_step_synced",
            True,
            fwd.where,
            "the last micro-step runs after the no_sync block",
        )


def _deepspeed_plugin(rc: RuleContext) -> bool:
    """The script hands accelerate a DeepSpeed plugin (``DeepSpeedPlugin(...)``, or
    ``Accelerator(deepspeed_plugin=...)`` / ``deepspeed_plugins=``)."""
    for e in rc.a.calls():
        if e.name.rsplit(".", 1)[-1] == "DeepSpeedPlugin":
            return True
        if any(k in ("deepspeed_plugin", "deepspeed_plugins") for k in e.kwargs):
            return True
    return False


def _guarded(e: Event) -> bool:
    """Under an ``if`` the scan cannot decide that is neither a test of the rank nor one that
    holds in every multi-rank job (``if ddp:``)."""
    return any(
        isinstance(c, CondCtx)
        and c.const is None
        and c.job not in ("all", "none")
        and not is_rank_cond(c)
        for c in e.ctx
    )


def _toggled(e: Event) -> bool:
    """``x.require_backward_grad_sync = <test>``: the sync is skipped only on the micro-steps
    where the test fails, not on every one."""
    return e.kind == "assign" and not (e.value is not None and e.value.known)


def _last_per_model(fwds: list[Event]) -> list[Event]:
    """Of the DDP forwards that run in one micro-step, the last one of each model: its
    backward is the one that all-reduces, and it carries the gradients earlier backwards left
    under no_sync (FGM's clean pass under no_sync, then the adversarial pass that syncs)."""
    last: dict[str, Event] = {}
    for f in sorted(fwds, key=lambda e: e.seq):
        tail = f":{f.seq}"
        own = [
            t for t in (f.result.taint if f.result is not None else ()) if t.startswith("fwdof:")
        ]
        model = next((t[: -len(tail)] for t in own if t.endswith(tail)), f"seq:{f.seq}")
        last[model] = f
    return sorted(last.values(), key=lambda e: e.seq)

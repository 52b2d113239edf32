"""Gradient accumulation, no_sync, the forward route through DDP and the loss's normalisation
(kb/causes/accumulation.yaml)."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable

from ddpadvisor.scan import apis
from ddpadvisor.scan import values as V
from ddpadvisor.scan.analysis import Accum, Analysis, text
from ddpadvisor.scan.context import Ctx, Event, FuncCtx
from ddpadvisor.scan.interp import FuncRef
from ddpadvisor.scan.library import hf_trainer, lightning
from ddpadvisor.scan.rules.base import (
    RuleContext,
    call_site,
    cli_switched,
    exclusive,
    lines_at,
    mentions_world,
    num,
)
from ddpadvisor.scan.rules.registry import ANY_EXCERPT, not_in_excerpt, rule
from ddpadvisor.scan.source import Module, dotted
from ddpadvisor.scan.values import Op, Val


@rule(
    "The accumulation count, whether the loss is divided by it, and where zero_grad runs.",
    facts={
        "grad_accum_steps": not_in_excerpt(1),
        "loss_divided_by_accum": ANY_EXCERPT,  # off the backward line inside the window shown
        "zero_grad_every_micro_step": ANY_EXCERPT,
    },
)
def accumulation(rc: RuleContext) -> None:
    a = rc.a
    acc = a.accum
    if rc.ds is not None:
        rc.warn(f"{rc.ds.where}: DeepSpeed config decides gradient accumulation")
        return
    if rc.hf:
        val, where = rc.hf_arg("gradient_accumulation_steps")
        k = num(val)
        if val is not None and (val.known or "default" in val.taint):
            k_int = int(k) if k is not None else 1
            rc.emit(
                "grad_accum_steps",
                k_int,
                where,
                f"TrainingArguments(gradient_accumulation_steps={k_int})",
            )
        else:
            k_int = None
        own = _trainer_loss(rc)
        info = rc._class_of(rc.trainer())
        overridden = info is not None and "compute_loss" in hf_trainer.loop_overrides(info)
        if own is not None and k_int is not None and k_int >= 2:
            rc.emit("loss_divided_by_accum", own.value, own.where, own.why)
        elif own is not None and k_int is None and not own.value:
            rc.warn(f"{own.where}: {own.why} (if the run accumulates)")
        elif overridden and own is None:
            rc.warn(
                f"{where or rc.label}: compute_loss is overridden; whether its loss is scaled "
                "for accumulation is not decided"
            )
        elif k_int is not None and k_int >= 2:
            rc.emit(
                "loss_divided_by_accum",
                True,
                where,
                "HF Trainer scales the loss for accumulation",
            )
        rc.emit(
            "zero_grad_every_micro_step",
            False,
            where,
            "HF Trainer zeroes gradients once per optimizer step",
        )
        return
    if rc.pl and not _pl_manual(rc):
        _lightning_accumulation(rc)
        return
    if acc.style == "framework":
        if acc.k is not None and acc.k_default:
            rc.cli_default("grad_accum_steps", acc.k, acc.k_where)
        elif acc.k is not None:
            rc.emit(
                "grad_accum_steps",
                acc.k,
                acc.k_where,
                f"accelerate accumulates {acc.k} micro-batches",
            )
        rc.emit(
            "loss_divided_by_accum",
            True,
            acc.k_where,
            "accelerator.backward() divides the loss by the accumulation steps",
        )
        rc.emit(
            "zero_grad_every_micro_step",
            False,
            acc.k_where,
            "accelerate skips zero_grad() on non-final micro-steps",
        )
        return
    if acc.style == "unknown":
        if acc.backward is not None and a.opt_steps:
            rc.warn(f"{acc.backward.where}: accumulation structure not recognised ({acc.reason})")
        return
    b = acc.backward
    assert b is not None
    if acc.style == "none":
        rc.emit(
            "grad_accum_steps",
            1,
            acc.step.where if acc.step else b.where,
            "optimizer.step() after every backward (no accumulation)",
        )
    elif acc.k is not None and acc.k_default:
        if rc.given_number("grad_accum_steps") is None:
            rc.cli_default("grad_accum_steps", acc.k, acc.k_where)
    elif acc.k is not None:
        how = "inner micro-batch loop" if acc.style == "inner" else "step counter modulo"
        rc.emit(
            "grad_accum_steps",
            acc.k,
            acc.k_where,
            f"{acc.k} micro-batches per optimizer step ({how})",
        )
    else:
        rc.warn(f"{acc.k_where}: gradient accumulation found but its count is not a constant")
    _loss_divided(rc, acc)
    _zero_grad(rc, acc)


def _trainer_loss(rc: RuleContext) -> hf_trainer.Decided | None:
    """What a Trainer subclass's own compute_loss does to accumulation scaling."""
    info = rc._class_of(rc.trainer())
    if info is None:
        return None
    model = rc.obj(rc.trainer_model())
    hf_model = any(
        e.name.startswith(("transformers.", "peft.")) and _is_model_factory(apis.last(e.name))
        for e in rc.a.calls()
    )
    labels = any(hf_trainer.script_labels(m.tree) for m in rc.walk.sources.modules.values())
    labels = labels or hf_trainer.script_labels(rc.walk.sources.main.tree)
    return hf_trainer.loss_scaled_for_accumulation(
        info, hf_trainer.model_takes_loss_kwargs(rc._class_of(model), hf_model), labels
    )


def _is_model_factory(name: str) -> bool:
    return name in ("from_pretrained", "from_config", "get_peft_model") or name.endswith(
        ("Model", "ForCausalLM", "LMHeadModel", "ForSequenceClassification")
    )


def _pl_manual(rc: RuleContext) -> bool:
    """Lightning with manual optimization: training_step runs backward, step and zero_grad
    itself, so its accumulation is read as a hand-written loop's."""
    tr = rc.pl_trainer()
    return bool(tr is not None and tr.extra.get("manual"))


def _lightning_k(rc: RuleContext) -> tuple[int | None, str]:
    val, where = rc.pl_arg("accumulate_grad_batches", lightning.DEFAULTS["accumulate_grad_batches"])
    k = num(val) if val is not None else None
    return (int(k) if k is not None else None), where


def _lightning_accumulation(rc: RuleContext) -> None:
    tr = rc.pl_trainer()
    if tr is None or tr.extra.get("manual"):
        rc.warn(f"{rc.label}: Lightning manual optimization: the module's own loop decides")
        return
    k, where = _lightning_k(rc)
    if k is None:
        return
    rc.emit("grad_accum_steps", k, where, f"Trainer(accumulate_grad_batches={k})")
    if k >= 2:
        rc.emit(
            "loss_divided_by_accum",
            True,
            where,
            "Lightning divides the training_step loss by accumulate_grad_batches",
        )
    rc.emit(
        "zero_grad_every_micro_step",
        False,
        where,
        "Lightning zeroes gradients once per optimizer step",
    )


def _divides(op: Op) -> bool:
    """A division of the loss, written as one or as a product with a ratio or a fraction
    (``loss * (fragment / batch)``, ``loss * 0.25``): either may be the accumulation scaling."""
    if op.op == "div":
        return True
    if op.op != "mul":
        return False
    if isinstance(op.expr, ast.BinOp) and isinstance(op.expr.op, (ast.Div, ast.FloorDiv)):
        return True
    value = num(op.val) if op.val.known else None
    return value is not None and 0 < value < 1


def _may_accumulate(rc: RuleContext, accum: Accum) -> tuple[bool, int | None]:
    """Whether the run may accumulate, and its count where one is known. A count that is only
    a default (``--accum_iter`` defaulting to 1) is not the run's: the run may pass another,
    so the loss is read as if it accumulates; a count other evidence gives (``--set
    grad_accum_steps=4``, an attached config) stands for the run's."""
    k = accum.k
    if accum.k_default or k is None:
        given = rc.given_number("grad_accum_steps")
        if given is not None:
            return given >= 2, int(given)
    if accum.k_default:
        return True, None
    return bool(accum.accumulates) or k is None, k


def _loss_divided(rc: RuleContext, acc: object) -> None:
    a = rc.a
    accum = a.accum
    may, count = _may_accumulate(rc, accum)
    if not may:
        return
    if accum.style == "none":
        return
    b = accum.backward
    assert b is not None
    loss = a.loss_of(b)
    if V.FWD not in loss.taint:
        rc.warn(f"{b.where}: cannot trace the loss back to the model; loss scaling not decided")
        return
    loop = accum.micro_loop
    iter_text = ""
    if loop is not None and isinstance(loop.node, (ast.For, ast.AsyncFor)):
        iter_text = text(loop.node.iter)
    divs = [op for op in loss.ops if _divides(op)]
    for op in divs:
        t = text(op.expr, 200)
        value = num(op.val) if op.val.known else None
        if value is not None and op.op == "mul":
            value = 1 / value if value else None
        if names_the_count(t, value, accum) or (iter_text and t == f"len({iter_text})"):
            rc.emit("loss_divided_by_accum", True, b.where, f"loss divided by {t} before backward")
            return
    if V.NORM_GLOBAL in loss.taint:
        rc.emit(
            "loss_divided_by_accum",
            True,
            b.where,
            "loss normalised by the token count of the whole window",
        )
        return
    if divs:
        rc.warn(
            f"{b.where}: loss divided by {text(divs[0].expr)}; not sure it is the accumulation count"
        )
        return
    scaled = _grads_divided(accum)
    if scaled is not None:
        rc.emit(
            "loss_divided_by_accum",
            True,
            scaled[1],
            f"accumulated gradients divided by {scaled[0]} before the step: the same as "
            "dividing the loss",
        )
        return
    k = f"the {count} accumulation steps" if count else "the accumulation count"
    rc.emit(
        "loss_divided_by_accum",
        False,
        b.where,
        f"{text(b.node)} on a loss not divided by {k} ({b.where})",
    )


def names_the_count(t: str, value: object, accum: Accum) -> bool:
    """A divisor (as written, and its value when constant) that is the accumulation count."""
    return (
        (accum.k is not None and value == accum.k)
        or (accum.k_node is not None and t == text(accum.k_node))
        or any(w in t.lower() for w in ("accum", "grad_acc", "gradient_acc", "micro"))
    )


def _grads_divided(accum: Accum) -> tuple[str, str] | None:
    """``p.grad /= k`` (or ``p.grad.div_(k)``) in the loop that steps, by the accumulation
    count: (the divisor as written, where)."""
    step = accum.step
    loops = step.loops() if step is not None else []
    if step is None or not loops:
        return None
    label = step.where.rsplit(":", 1)[0]

    def is_count(node: ast.AST) -> bool:
        value = node.value if isinstance(node, ast.Constant) else None
        return names_the_count(text(node, 200), value, accum)

    # the loop that holds both the micro-steps and the step (steps may sit in a loop of their own)
    micro = accum.micro_loop
    around = [x for x in loops if micro is None or any(n is micro.node for n in ast.walk(x.node))]
    for sub in ast.walk((around or loops)[-1].node):
        divisor: ast.AST | None = None
        if (
            isinstance(sub, ast.AugAssign)
            and isinstance(sub.op, ast.Div)
            and isinstance(sub.target, ast.Attribute)
            and sub.target.attr == "grad"
        ):
            divisor = sub.value
        elif (
            isinstance(sub, ast.Call)
            and isinstance(sub.func, ast.Attribute)
            and sub.func.attr in ("div_", "true_divide_")
            and isinstance(sub.func.value, ast.Attribute)
            and sub.func.value.attr == "grad"
            and sub.args
        ):
            divisor = sub.args[0]
        if divisor is not None and is_count(divisor):
            return text(divisor), f"{label}:{getattr(sub, 'lineno', 0)}"
    return None


def _zero_grad_by_structure(rc: RuleContext, accum: Accum, zs: list[Event], scope: Ctx) -> None:
    """The count defaults to 1 (a command-line or constructor default), so simulating it says
    nothing; the structure does: a zero_grad() outside the ``if`` that steps runs on every
    micro-step whenever the run accumulates."""
    guard = accum.boundary
    if guard is None:
        return
    # unconditional within the micro-step (a second optimizer's own guarded zero_grad is not)
    outside = [z for z in zs if not any(c not in scope for c in z.conds())]
    if outside:
        z = outside[0]
        rc.emit(
            "zero_grad_every_micro_step",
            True,
            z.where,
            f"zero_grad() ({z.where}) outside the step's condition ({guard.file}:{guard.line}): "
            "with accumulation on, only the last micro-batch's gradient survives",
        )
        return
    rc.emit("zero_grad_every_micro_step", False, zs[0].where, "zero_grad() only when it steps")


def _zero_grad(rc: RuleContext, acc: object) -> None:
    a = rc.a
    accum = a.accum
    win = a.window
    if win is None:
        return
    zs = [z for z in a.zero_grads if a.in_window(z, win)]
    if zs and accum.style == "modulo" and accum.k_default and (accum.k or 0) < 2:
        _zero_grad_by_structure(rc, accum, zs, win.scope)
        return
    if not zs:
        if not a.zero_grads:
            rc.warn(f"{rc.label}: no zero_grad() found: gradients may grow without bound")
        elif accum.style == "inner":
            z = a.zero_grads[0]
            rc.emit(
                "zero_grad_every_micro_step",
                False,
                z.where,
                "zero_grad() once per optimizer step, outside the micro-batch loop",
            )
        return
    per_window: list[tuple[Event, int]] = []
    for z in zs:
        runs = [a.runs_at(z, i, win) for i in win.indices]
        if any(r is None for r in runs):
            rc.warn(f"{z.where}: cannot tell how often zero_grad() runs")
            return
        per_window.append((z, sum(1 for r in runs if r)))
    windows = max(1, len(win.boundaries))
    every = [z for z, n in per_window if n == len(win.indices) and len(win.indices) > windows]
    if every:
        for z in every:
            rc.emit(
                "zero_grad_every_micro_step",
                True,
                z.where,
                f"zero_grad() inside the accumulation loop ({z.where}): only the last micro-batch survives",
            )
        return
    z = per_window[0][0]
    rc.emit("zero_grad_every_micro_step", False, z.where, "zero_grad() once per optimizer step")


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
    if rc.hf:
        rc.emit("final_micro_step_synced", True, "", "HF Trainer synchronises the last micro-step")
        return
    if rc.pl:
        tr = rc.pl_trainer()
        k, where = _lightning_k(rc)
        if tr is None or tr.extra.get("manual") or k is None:
            return
        rc.emit(
            "uses_no_sync",
            k >= 2,
            where,
            "Lightning's DDP strategy skips the all-reduce on accumulating batches"
            if k >= 2
            else "no accumulation: every batch synchronises",
        )
        rc.emit("final_micro_step_synced", True, where, "Lightning synchronises the last batch")
        return
    acc = a.accum
    if acc.style == "framework":
        rc.emit(
            "uses_no_sync",
            True,
            acc.k_where,
            "accelerator.accumulate() skips sync on non-final micro-steps",
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
        for f in fwds:
            runs = a.runs_at(f, i, win)
            if runs is None:
                rc.warn(f"{f.where}: cannot tell which micro-step this forward runs in")
                return
            if not runs:
                continue
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


@rule(
    "Whether the training forward goes around the DDP wrapper.",
    facts={
        "forward_bypasses_ddp": ANY_EXCERPT,  # off the forward call shown
    },
)
def forward_route(rc: RuleContext) -> None:
    a = rc.a
    fact = "forward_bypasses_ddp"
    if rc.hf:
        return
    if rc.pl:
        tr = rc.pl_trainer()
        if tr is not None and not tr.extra.get("manual"):
            rc.emit(
                fact,
                False,
                tr.where,
                "Lightning calls training_step through its DDP wrapper's forward",
            )
        return
    if not a.ddps or a.main_backward is None:
        return
    wrapped = {o.wraps: o for o in a.ddps if o.wraps is not None}
    decided = False
    undecided: list[tuple[Event, Event]] = []
    for b in a.backwards:
        loss = a.loss_of(b)
        if V.FWD not in loss.taint:
            continue
        # Each forward whose output reaches this backward with gradients: through the
        # wrapper, or around it (``model.module(x)``, the inner model after the wrap).
        through: list[Event] = []
        around: list[Event] = []
        for t in loss.taint:
            if not t.startswith("fwdseq:"):
                continue
            f = a.by_seq.get(int(t.split(":", 1)[1]))
            if f is None or f.result is None or a.under_no_grad(f):
                continue
            r = {x.split(":", 1)[1] for x in f.result.taint if x.startswith("route:")}
            ref_txt = {x.split(":", 1)[1] for x in f.result.taint if x.startswith("model:")}
            ref = next((int(x) for x in ref_txt if x.isdigit()), None)
            if r & {V.DDP, V.FSDP}:
                through.append(f)
            elif V.DDP_MODULE in r or (
                V.MODEL in r and ref in wrapped and f.seq > wrapped[ref].seq
            ):
                around.append(f)
        if not through and not around:
            routes = {t.split(":", 1)[1] for t in loss.taint if t.startswith("route:")}
            decided = decided or bool(routes & {V.DDP, V.FSDP})
            continue
        for f in sorted(around, key=lambda e: e.seq):
            other = [g for g in through if exclusive(f, g)]
            if through and len(other) < len(through):
                continue  # both reach the same loss: DDP still sees the parameters' gradients
            if other and any(_alternatives(f, g) for g in other):
                undecided.append((f, other[0]))
                continue
            # Around the wrapper on every path the job takes, or on some ranks (``if rank
            # == 0:``, a side the world size or distributed mode selects): a bypass.
            where = call_site(f)
            rc.emit(
                fact,
                True,
                where,
                f"training forward goes around the DDP wrapper ({where}): gradients are never all-reduced",
            )
            return
        decided = decided or bool(through)
    if undecided:
        f, g = undecided[0]
        cond = next(c for c in f.conds() if any(d.node is c.node for d in g.conds()))
        rc.warn(
            f"{cond.file}:{cond.line}: the training forward goes around the DDP wrapper "
            f"({call_site(f)}) on one side of this test and through it on the other; "
            "which one the run takes is not decided"
        )
        return
    if decided:
        rc.emit(
            fact,
            False,
            a.main_backward.where,
            "training forward goes through the DDP-wrapped model",
        )


def _alternatives(f: Event, g: Event) -> bool:
    """``f`` and ``g`` sit on the two sides of a test the scan cannot decide (not one on the
    rank, the world size or the distributed mode: see interp.branches)."""
    for x in f.conds():
        for y in g.conds():
            if x.node is y.node and x.branch != y.branch and x.job is None:
                return True
    return False


def _models_of(a: Analysis, backward: Event) -> set[str]:
    """The models (object refs) whose forward the loss of ``backward`` came from."""
    return {t.split(":", 1)[1] for t in a.loss_of(backward).taint if t.startswith("model:")}


def _ddp_forwards(a: Analysis, backward: Event) -> set[str]:
    """The forward passes of a DDP model (``<ref>:<seq>``) the loss of ``backward`` came from."""
    ddps = {str(d.ref) for d in a.ddps}
    out = set()
    for t in a.loss_of(backward).taint:
        if t.startswith("fwdof:"):
            ref, seq = t[len("fwdof:") :].split(":", 1)
            if ref in ddps:
                out.add(f"{ref}:{seq}")
    return out


@rule(
    "Whether another backward through the DDP model runs in the same step.",
    facts={
        "extra_backward_through_ddp": not_in_excerpt(False),
    },
)
def extra_backward(rc: RuleContext) -> None:
    a = rc.a
    fact = "extra_backward_through_ddp"
    b = a.main_backward
    if rc.hf or b is None or not a.ddps:
        return
    loop = a.step_loop
    if loop is None:
        return
    same = [
        x
        for x in a.backwards
        if loop in x.ctx
        and V.FWD in a.loss_of(x).taint
        and not any(w.kind == V.CTX_NO_SYNC and w.cond is None for w in x.withs())
    ]
    ddp_routed = [x for x in same if "route:ddp" in a.loss_of(x).taint]
    if not ddp_routed:
        return
    first = ddp_routed[0]
    for x in ddp_routed[1:]:
        if exclusive(first, x):
            continue
        mine, theirs = _models_of(a, first), _models_of(a, x)
        if mine and theirs and not mine & theirs:
            continue  # another DDP model's own backward (a GAN's second net, a reference copy)
        stepped = any(first.seq < s.seq < x.seq for s in a.opt_steps)
        if (
            stepped
            and not _ddp_forwards(a, first) & _ddp_forwards(a, x)
            and set(x.conds()) <= set(first.conds())
        ):
            # A later update's own pass (a GAN's generator loss through the discriminator
            # again, after the discriminator stepped): its own DDP forward, on every step the
            # first runs, and the first backward's gradients were used up already.
            continue
        rc.emit(
            fact,
            True,
            x.where,
            f"a second backward through the DDP model in the same step ({x.where}), outside no_sync",
        )
        return
    rc.emit(fact, False, first.where, "one backward through the DDP model per micro-step")


def _trained_loss(rc: RuleContext) -> tuple[Val, str] | None:
    """The loss that goes to backward (a LightningModule's training_step return under
    automatic optimization) and where, when it comes from the model's forward."""
    a = rc.a
    b = a.main_backward
    tr = rc.pl_trainer() if rc.pl else None
    if tr is not None:
        step = (tr.extra.get("hooks") or {}).get("training_step")
        if step is None or tr.extra.get("manual"):
            return None
        loss, where = step, tr.where
    elif b is None:
        return None
    else:
        loss, where = a.loss_of(b), b.where
    return (loss, where) if V.FWD in loss.taint else None


@rule(
    "Whether the trained loss is multiplied by the world size.",
    facts={
        "loss_multiplied_by_world_size": not_in_excerpt(False),
    },
)
def loss_scaling(rc: RuleContext) -> None:
    if rc.hf:
        _trainer_world_factor(rc, "loss_multiplied_by_world_size", "mul")
        return
    trained = _trained_loss(rc)
    if trained is None:
        return
    loss, where = trained
    if V.MUL_WORLD in loss.taint and V.NORM_GLOBAL not in loss.taint:
        where = (lines_at(loss.taint, "mulworld") or [where])[-1]
        rc.emit(
            "loss_multiplied_by_world_size",
            True,
            where,
            f"loss multiplied by the world size before backward ({where}); DDP already averages",
        )
        return
    rc.emit("loss_multiplied_by_world_size", False, where, "loss not rescaled by the world size")


def _trainer_world_factor(rc: RuleContext, fact: str, op: str) -> None:
    """The world size in the loss of an HF Trainer: the Trainer's own compute_loss has none,
    a subclass's override may (library/hf_trainer.py). Where the script builds several
    Trainers (one per stage or option), the fact holds only when all of them agree."""
    infos = [rc._class_of(o) for o in rc.a.objs(V.TRAINER)]
    verdicts: list[tuple[str, hf_trainer.Decided] | None] = [
        hf_trainer.loss_world_factor(info) if info is not None else None for info in infos
    ]
    mine = [v[1] for v in verdicts if v is not None and v[0] == op]
    if not mine:
        rc.emit(fact, False, "", "HF Trainer computes the loss")
        return
    if len(mine) < len(verdicts):
        rc.warn(
            f"{mine[0].where}: {mine[0].why}, but only {len(mine)} of the {len(verdicts)} "
            f"Trainers the script builds do so; {fact} depends on which one runs; not decided"
        )
        return
    rc.emit(fact, True, mine[0].where, mine[0].why)


@rule(
    "Whether the trained loss is divided by the world size while DDP averages too.",
    facts={
        "loss_divided_by_world_size": not_in_excerpt(False),
    },
)
def loss_division(rc: RuleContext) -> None:
    """A loss divided by the world size (or normalised by a count summed over all ranks and not
    multiplied back) while DDP or FSDP averages the gradients as well: divided twice."""
    fact = "loss_divided_by_world_size"
    if rc.hf:
        _trainer_world_factor(rc, fact, "div")
        return
    averaged = rc.a.ddps or rc.a.fsdps or rc.pl_trainer() is not None
    trained = _trained_loss(rc)
    if trained is None or not averaged:
        return  # without DDP's average, a hand-written SUM of gradients wants the division
    loss, where = trained
    if V.MUL_WORLD in loss.taint:
        rc.emit(fact, False, where, "the loss carries the world size as a factor, not a divisor")
        return
    divided_at = lines_at(loss.taint, "divworld")  # the loss divided, not its divisor's history
    if divided_at:
        where = divided_at[-1]
        rc.emit(
            fact,
            True,
            where,
            f"loss divided by the world size before backward ({where}); DDP divides again",
        )
        return
    if V.NORM_GLOBAL in loss.taint:
        where = (lines_at(loss.taint, "normglobal") or [where])[-1]
        rc.emit(
            fact,
            True,
            where,
            f"loss normalised by a count summed over all ranks and not multiplied back by the "
            f"world size ({where}); DDP's average divides it by the world size again",
        )
        return
    rc.emit(fact, False, where, "loss not divided by the world size")


@rule(
    "Whether a DDP communication hook (or a hand-written all-reduce) is used, and whether it averages.",
    facts={
        "uses_comm_hook": not_in_excerpt(False),
        # a sum over the ranks is the average when the loss was divided by the world size before
        # backward, which a piece of a script need not show
        "comm_hook_averages": not_in_excerpt(False),
    },
)
def comm_hook(rc: RuleContext) -> None:
    a = rc.a
    fact = "uses_comm_hook"
    hooks = [e for e in a.calls("register_comm_hook")]
    if hooks:
        rc.emit(fact, True, hooks[0].where, f"DDP communication hook registered ({hooks[0].where})")
        _hook_averages(rc, hooks[0])
    manual = []
    for e in a.calls():
        if not (
            apis.last(e.name) in ("all_reduce", "all_reduce_coalesced", "reduce")
            and e.args
            and (e.args[0].kind == "grad" or ".grad" in text(e.kw_node("tensor", 0), 200))
        ):
            continue
        group = _group_of(e.node)
        if group is not None and not _DATA_PARALLEL_GROUP.search(group):
            # over a context-, tensor- or sequence-parallel group each rank holds a shard's
            # share of the gradient, and summing the shares is the right reduction; it is not
            # the data-parallel average DDP does
            rc.warn(f"{e.where}: gradients all-reduced over the group {group}; not read as DDP's")
            continue
        manual.append(e)
    if manual:
        e = manual[0]
        rc.emit(fact, True, e.where, f"gradients all-reduced by hand after backward ({e.where})")
        loop = e.loops()[-1] if e.loops() else None
        body = loop.node if loop is not None else e.node
        b = a.main_backward
        taint = a.loss_of(b).taint if b is not None else frozenset()
        sums = not _reduce_averages(e.node)
        # the loss itself divided by the world size (not a count that was: nanoGPT's
        # accumulation steps are the global count // world size)
        if b is not None and sums and lines_at(taint, "divworld"):
            # the loss went to backward already divided by the world size: the summed
            # gradients are the average (the classic hand-written data parallelism)
            rc.emit(
                "comm_hook_averages",
                True,
                e.where,
                f"the loss was divided by the world size before backward ({b.where}), so the "
                "summed gradients are the average",
            )
        elif sums and V.SUM_RED in taint:
            # A loss summed over samples, summed over ranks: the gradient of the whole global
            # batch, as one GPU computes it for the same summed loss; no W-times mismatch.
            rc.warn(
                f"{e.where}: gradients summed across ranks of a loss summed over samples; "
                "their scale matches one GPU on the global batch"
            )
        else:
            _averages_in(rc, body, e.where, "the hand-written gradient all-reduce")
    if hooks or manual:
        rc._sort_fault("comm_hook_averages", False)
        return
    if rc.hf or rc.acc:
        rc.emit(fact, False, "", "the framework synchronises gradients")
    elif a.ddps and a.main_backward is not None:
        rc.emit(fact, False, a.ddps[0].where, "DDP's own gradient averaging, no hook")


def _hook_averages(rc: RuleContext, reg: Event) -> None:
    hook = reg.kw("hook", 1)
    if hook is None:
        return
    # a bare name an excerpt never imports may be the user's own hook of the same name
    if hook.kind == "symbol" and hook.canon and V.UNBOUND not in hook.taint:
        stock = apis.last(hook.canon)
        if stock in (
            "allreduce_hook",
            "fp16_compress_hook",
            "bf16_compress_hook",
            "powerSGD_hook",
            "batched_powerSGD_hook",
        ):
            rc.emit(
                "comm_hook_averages",
                True,
                reg.where,
                f"stock {stock} divides by the world size",
            )
        return
    if isinstance(hook.const, FuncRef):
        fn = hook.const.node
        _averages_in(
            rc, fn, f"{hook.const.scope.module.label}:{fn.lineno}", f"hook {hook.const.name}()"
        )


# A group expression that names the data-parallel group, or the whole world.
_DATA_PARALLEL_GROUP = re.compile(
    r"(?i)(?<![a-z])(?:dp|ddp|data|world|default)(?![a-z])|data_parallel"
)


def _group_of(node: ast.AST) -> str | None:
    """The process group an all-reduce call names (``group=`` or its third argument), as written;
    None for the default group."""
    if not isinstance(node, ast.Call):
        return None
    given = [k.value for k in node.keywords if k.arg == "group"]
    if apis.last(dotted(node.func)) == "all_reduce":
        given += node.args[2:3]  # all_reduce(tensor, op, group)
    if not given or (isinstance(given[0], ast.Constant) and given[0].value is None):
        return None
    return text(given[0], 120)


def _reduce_averages(node: ast.AST) -> bool:
    """An all-reduce call whose op is ReduceOp.AVG (positional or ``op=``): it averages."""
    if not isinstance(node, ast.Call):
        return False
    ops = [k.value for k in node.keywords if k.arg == "op"] + node.args[1:2]
    return any(dotted(op).endswith("AVG") for op in ops)


def _averages_in(rc: RuleContext, node: ast.AST, where: str, what: str) -> None:
    """Does this code divide the all-reduced sum by the world / group size?"""
    reduces = False
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call) and apis.last(dotted(sub.func)) in (
            "all_reduce",
            "allreduce",
        ):
            if _reduce_averages(sub):
                rc.emit("comm_hook_averages", True, where, f"{what} uses ReduceOp.AVG")
                return
            reduces = True
        divisor: ast.AST | None = None
        if isinstance(sub, ast.BinOp) and isinstance(sub.op, (ast.Div, ast.FloorDiv)):
            divisor = sub.right
        elif isinstance(sub, ast.AugAssign) and isinstance(sub.op, (ast.Div, ast.FloorDiv)):
            divisor = sub.value
        elif (
            isinstance(sub, ast.Call)
            and isinstance(sub.func, ast.Attribute)
            and sub.func.attr in ("div_", "div", "true_divide_")
            and sub.args
        ):
            divisor = sub.args[0]
        if divisor is not None and mentions_world(divisor):
            rc.emit("comm_hook_averages", True, f"{where}", f"{what} divides by the world size")
            return
    if reduces:
        rc.emit(
            "comm_hook_averages",
            False,
            where,
            f"{what} all-reduces (sums) without dividing by the world size ({where})",
        )


def _token_signals(rc: RuleContext) -> list[str]:
    """Padding, label masking or token-count plumbing anywhere in the scanned files."""
    found: list[tuple[str, int]] = []
    modules = [rc.walk.sources.main, *rc.walk.sources.modules.values()]
    ran_funcs = {(c.file, c.line) for e in rc.a.events for c in e.ctx if isinstance(c, FuncCtx)}
    for m in modules:
        idx = m.index
        out: list[tuple[str, int]] = []
        for kw in idx.keywords:
            value = kw.value
            const = value.value if isinstance(value, ast.Constant) else None
            # ``ignore_index=`` alone is no sign of padding (nanoGPT passes -1 on fixed-size
            # blocks): masking shows where labels are set to the ignored value (``neg100``).
            if (
                kw.arg == "num_items_in_batch"
                or (kw.arg == "padding" and (const is True or const in ("longest", "max_length")))
                or (kw.arg == "packing" and const is True)
            ):
                out.append((m.label, value.lineno))
        for call, name, _ in idx.calls:
            if apis.last(name) in apis.PADDING_SIGNALS - {"pad"}:
                out.append((m.label, call.lineno))
        out.extend((m.label, s.lineno) for s in idx.strings if s.value == "attention_mask")
        # (``pad_token_id`` is not one: nearly every tokenizer or LM config names a pad token,
        # padded batches show as padding=, a collator, an attention mask or -100 labels.)
        out.extend((m.label, a.lineno) for a in idx.attrs if a.attr == "attention_mask")
        out.extend((m.label, u.lineno) for u in idx.neg100)
        if m is not rc.walk.sources.main:
            # A module imported for one name: only the functions the walk ran count (an
            # audio tower's padding says nothing about an image model's batches).
            ran = _ran_lines(ran_funcs, m)
            out = [w for w in out if ran(w[1])]
        found.extend(out)
    found.sort(key=lambda w: (w[0] != rc.label, w[1]))
    return [f"{f}:{line}" for f, line in found]


def _ran_lines(ran_funcs: set[tuple[str, int]], m: Module) -> Callable[[int], bool]:
    """Whether a line of an imported module is in code the walk ran: its top level, or a
    function called on the way (innermost enclosing function decides)."""
    ran = {line for file, line in ran_funcs if file == m.label}
    spans = sorted(
        (n.lineno, n.end_lineno or n.lineno, n.lineno in ran)
        for n in ast.walk(m.tree)
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
    )

    def check(line: int) -> bool:
        inner = [span for span in spans if span[0] <= line <= span[1]]
        return not inner or max(inner, key=lambda span: span[0])[2]

    return check


@rule(
    "How the loss is reduced, over sequences of varying length, and over whose tokens.",
    facts={
        "loss_reduction": ANY_EXCERPT,
        "variable_length_sequences": not_in_excerpt(False),
        "loss_normalised_by_global_tokens": not_in_excerpt(False),
    },
)
def loss_shape(rc: RuleContext) -> None:
    a = rc.a
    if rc.hf:
        rc.emit("loss_reduction", "mean", "", "HF models return a mean loss")
    b = a.main_backward
    loss = a.loss_of(b) if b is not None else None
    if b is not None and loss is not None and not rc.hf and V.FWD in loss.taint:
        if V.SUM_RED in loss.taint:
            rc.emit(
                "loss_reduction",
                "sum",
                b.where,
                "loss is a sum over the batch (reduction='sum' or .sum())",
            )
        elif V.MEAN_RED in loss.taint:
            rc.emit("loss_reduction", "mean", b.where, "loss is a mean over the batch")
    signals = _token_signals(rc)
    tokenized = (
        signals
        or any(o.canon == "tokenizer" or "Tokenizer" in o.canon for o in a.objects.values())
        or any(e.result is not None and e.result.kind == "tokenizer" for e in a.events)
    )
    dense = _dense_loss(rc, loss) if signals and loss is not None else None
    if dense is not None:
        # captions padded for a text encoder, an image regressed: padding of a conditioning
        # input, not a loss averaged over tokens of varying count
        rc.warn(
            f"{signals[0]}: padding found, but the trained loss is {dense} on dense outputs; "
            "variable-length sequences not decided"
        )
        return
    if signals:
        rc.emit(
            "variable_length_sequences",
            True,
            signals[0],
            f"padding / label masking ({signals[0]})",
        )
    elif not tokenized and (a.main_backward is not None) and not _data_from_elsewhere(rc):
        rc.emit(
            "variable_length_sequences",
            False,
            a.main_backward.where,
            "fixed-size examples: no padding or label masking",
        )
    else:
        return
    if not signals:
        return
    if rc.hf:
        own = _trainer_loss(rc)
        if own is not None and not own.value:
            rc.emit(
                "loss_normalised_by_global_tokens",
                False,
                own.where,
                "compute_loss returns each micro-batch's own mean and drops num_items_in_batch",
            )
            return
        val, where = rc.hf_arg("average_tokens_across_devices")
        if own is not None and own.by_count and not (val is not None and val.const is False):
            rc.emit(
                "loss_normalised_by_global_tokens",
                True,
                own.where,
                "compute_loss divides by num_items_in_batch, the target tokens of every "
                "micro-batch (on every rank unless average_tokens_across_devices=False)",
            )
            return
        if val is not None and val.known and val.const is True:
            rc.emit(
                "loss_normalised_by_global_tokens",
                True,
                where,
                "average_tokens_across_devices=True",
            )
        return
    if b is None or loss is None or V.FWD not in loss.taint:
        return
    if V.NORM_GLOBAL in loss.taint:
        rc.emit(
            "loss_normalised_by_global_tokens",
            True,
            b.where,
            "loss divided by a token count summed across ranks",
        )
    elif V.MEAN_RED in loss.taint:
        where = _loss_line(rc, loss) or b.where
        rc.emit(
            "loss_normalised_by_global_tokens",
            False,
            where,
            f"per-rank mean over this batch's tokens ({where}): ranks with few tokens weigh as much as full ones",
        )


# Losses that regress dense outputs (pixels, latents, noise) rather than classify tokens.
DENSE_LOSSES = {
    "mse_loss",
    "l1_loss",
    "smooth_l1_loss",
    "huber_loss",
    "MSELoss",
    "L1Loss",
    "SmoothL1Loss",
    "HuberLoss",
}


TOKEN_LOSSES = {"cross_entropy", "nll_loss", "CrossEntropyLoss", "NLLLoss"}


def _dense_loss(rc: RuleContext, loss: Val) -> str | None:
    """The regression loss the step trains on (``F.mse_loss(pred, noise)``, an ``MSELoss``
    criterion) when the step computes no token loss (no cross-entropy, no model called with
    ``labels=``); None otherwise."""
    b = rc.a.main_backward
    if b is None or V.FWD not in loss.taint:
        return None
    loops = b.loops()
    scope = [e for e in rc.a.calls() if not loops or loops[-1] in e.ctx]
    names = {apis.last(e.name) or (e.method or "") for e in scope}
    names |= {apis.last(o.canon) for o in rc.a.objs(V.CRITERION)}
    if names & TOKEN_LOSSES or any("labels" in e.kwargs for e in scope):
        return None
    dense = sorted(names & DENSE_LOSSES)
    return dense[0] if dense else None


def _loss_line(rc: RuleContext, loss: Val) -> str | None:
    """Where the loss was reduced: the criterion call feeding the backward."""
    seqs = [int(t.split(":", 1)[1]) for t in loss.taint if t.startswith("fwdseq:")]
    if not seqs:
        return None
    fwd = rc.a.by_seq.get(seqs[-1])
    if fwd is None:
        return None
    for e in rc.a.events:
        if e.seq <= fwd.seq or e.kind != "call" or e.result is None:
            continue
        if f"fwdseq:{fwd.seq}" in e.result.taint and V.MEAN_RED in e.result.taint:
            return e.where
        if e.seq > fwd.seq + 40:
            break
    return fwd.where


def _data_from_elsewhere(rc: RuleContext) -> bool:
    loader = rc.training_loader()
    if loader is None:
        return bool(rc.walk.sources.missing)
    ds = loader.kwargs.get("dataset")
    obj = rc.obj(ds)
    return obj is None and ds is not None and (V.UNBOUND in ds.taint or ds.kind is None)

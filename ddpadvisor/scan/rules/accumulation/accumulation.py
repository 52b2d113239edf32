from __future__ import annotations

import ast

from ddpadvisor.scan import values as V
from ddpadvisor.scan.analysis import Accum, text
from ddpadvisor.scan.context import Ctx, Event, common_prefix
from ddpadvisor.scan.library.views import SCRIPT, Accumulation
from ddpadvisor.scan.rules.base import RuleContext, may_not_run, names_the_count, num
from ddpadvisor.scan.rules.registry import ANY_EXCERPT, not_in_excerpt, rule
from ddpadvisor.scan.values import Op


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
    fw = rc.framework
    said = fw.accumulation() if fw is not None else SCRIPT
    if isinstance(said, Accumulation):
        rc.say("grad_accum_steps", said.count)
        rc.say("loss_divided_by_accum", said.loss_divided)
        rc.say("zero_grad_every_micro_step", said.zero_grad_every_micro_step)
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
    other = _backward_an_option_skips(rc, acc)
    if other is not None:
        rc.warn(
            f"{acc.k_where}: the micro-batch loop around the backward at {b.where} runs only on "
            f"a path an option picks; on the other, the backward at {other.where} runs once per "
            "step: accumulation not decided"
        )
        _zero_grad(rc, acc)
        return
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


def _backward_an_option_skips(rc: RuleContext, acc: Accum) -> Event | None:
    """Another backward of the same training step that runs outside the micro-batch loop,
    where that loop (over parts of a batch, their number not read) sits on a path an option
    (or a test the scan cannot decide) picks: a model type whose helper backpropagates per
    view, beside the step's own backward for the other models. Which of the two trains is
    the run's choice, so neither is the accumulation."""
    b, loop, step = acc.backward, acc.micro_loop, acc.step
    if acc.style != "inner" or b is None or loop is None or step is None:
        return None
    if acc.k is not None or acc.k_default:
        # a count the code or the run sets (``range(args.accum_freq)``): when the run
        # accumulates, it is on this path, so the loss is read as if it does (defaults are
        # not facts); only a loop over parts of a batch whose number is not read is doubted
        return None
    at = next((i for i, c in enumerate(b.ctx) if c is loop), None)
    if at is None:
        return None
    step_loops = step.loops()
    for other in rc.a.backwards:
        if other is b or any(c is loop for c in other.ctx):
            continue
        if not step_loops or not all(any(c is x for c in other.ctx) for x in step_loops):
            continue  # another loop altogether (a warm-up pass, an evaluation)
        if V.FWD not in rc.a.loss_of(other).taint:
            continue
        shared = common_prefix(b.ctx, other.ctx)
        if may_not_run(rc, b, start=len(shared), stop=at):
            return other
    return None


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

from __future__ import annotations

import ast

from ddpadvisor.scan import apis
from ddpadvisor.scan import values as V
from ddpadvisor.scan.analysis import Accum, text
from ddpadvisor.scan.context import CondCtx, Event, FuncCtx
from ddpadvisor.scan.library.views import SCRIPT, LoggedLoss
from ddpadvisor.scan.rules.base import RuleContext, is_rank_cond, may_not_run, names_the_count, num
from ddpadvisor.scan.rules.registry import not_in_excerpt, rule
from ddpadvisor.scan.values import Val


@rule(
    "Whether the logged loss is reduced across ranks rightly, and whether rank 0 alone logs it.",
    facts={
        "logged_loss_reduction_wrong": not_in_excerpt(False),
        "logs_rank0_only": not_in_excerpt(False),
    },
)
def logging(rc: RuleContext) -> None:
    """How the logged training loss was reduced across ranks, read per value the log shows
    (each formatted value of an f-string, each entry of a metrics dict), wherever it flowed:
    collectives in place or returned, accelerate's gather/reduce, the project's own helpers
    (inlined), a running sum divided by a count. A value that passed through code the scan
    does not read leaves the facts it would decide undecided."""
    a = rc.a
    fw = rc.framework
    framework_log = fw.logged_loss() if fw is not None else SCRIPT
    if isinstance(framework_log, LoggedLoss):
        rc.say("logs_rank0_only", framework_log.rank0_only)
        rc.say("logged_loss_reduction_wrong", framework_log.reduction_wrong)
        return
    logs: list[Event] = []
    shown_at: dict[int, Event] = {}  # a log call inside the project's own wrapper: its call
    for e in a.calls():
        n = e.method or apis.last(e.name)
        if n not in apis.LOG_NAMES and apis.last(e.name) not in apis.LOG_NAMES:
            continue
        vals = [*e.args, *e.kwargs.values()]
        if not any(V.FWD in v.taint for v in vals) or _evaluation_only(rc, vals):
            continue
        sites = _wrapper_calls(rc, e)
        said = " ".join(text(x.node, 400) for x in [e, *sites]).lower()
        if "loss" not in said and not _names_a_loss(vals):
            continue
        logs.append(e)
        if sites:
            shown_at[e.seq] = sites[-1]
    if not logs:
        return
    backward = a.main_backward
    trained = a.loss_of(backward).taint if backward is not None else frozenset()
    rank0_unreduced: list[Event] = []
    reduced: list[Event] = []
    unread: list[Event] = []
    wrong: list[tuple[Event, str]] = []
    unsure: list[tuple[Event, str]] = []
    conditional: list[Event] = []  # reduced across ranks only under an if that may not hold
    for e in logs:
        leaves = _loss_leaves([*e.args, *e.kwargs.values()])
        if any(V.UNREAD_PATH in v.taint for v in leaves):
            unread.append(e)
            continue
        # The wrapper's own rank test (``if rank == 0: print(msg)``) is in the call's context.
        rank0 = any(is_rank_cond(c) for c in e.ctx) or (
            e.recv is not None and e.recv.kind == V.ACCELERATOR and e.method == "print"
        )
        odd = next((x for v in leaves if (x := _conditional_reduction(rc, v))), None)
        if odd is not None:
            conditional.append(e)
            why = f"the logged loss is reduced across ranks only under an if ({odd.where})"
            unsure.append((e, why))
            continue
        if any(V.REDUCED in v.taint for v in leaves):
            reduced.append(e)
        elif rank0 and not _reduced_in_place(rc, e, leaves):
            rank0_unreduced.append(shown_at.get(e.seq, e))
        for v in leaves:
            why, decided = _reduction(rc, v, trained)
            if why and decided:
                wrong.append((e, why))
            elif why:
                unsure.append((e, why))
    if unread:
        rc.warn(
            f"{unread[0].where}: the logged loss passes through code the scan does not read; "
            "how it was reduced across ranks is not decided"
        )
    scaled = _accum_scaled(rc, logs)
    if scaled is not None:
        e, divisor = scaled
        rc.emit(
            "logged_loss_reduction_wrong",
            True,
            e.where,
            f"logged loss is the last micro-batch's loss divided by {divisor} for backward, "
            f"neither summed over the window nor multiplied back ({e.where})",
        )
    elif wrong:
        e, why = wrong[0]
        rc.emit("logged_loss_reduction_wrong", True, e.where, f"logged loss {why} ({e.where})")
    elif unsure:
        e, why = unsure[0]
        rc.warn(f"{e.where}: {why}")
    elif reduced and not unread:
        rc.emit(
            "logged_loss_reduction_wrong",
            False,
            reduced[0].where,
            "logged loss averaged across ranks",
        )
    if reduced:
        rc.emit(
            "logs_rank0_only", False, reduced[0].where, "logged loss is reduced across ranks first"
        )
    elif rank0_unreduced and not unread and not conditional:
        e = rank0_unreduced[0]
        rc.emit(
            "logs_rank0_only",
            True,
            e.where,
            f"rank 0 logs its own micro-batch loss without an all_reduce ({e.where})",
        )


def _loss_leaves(vals: list[Val]) -> list[Val]:
    """The values a log call shows that come from a forward pass: the formatted values of an
    f-string and the entries of a dict or tuple, not the container (whose taint merges a
    gathered token count with a rank's own loss)."""
    return [v for v in _logged_values(vals) if V.FWD in v.taint and not v.items and not v.mapping]


def _reduction(rc: RuleContext, v: Val, trained: frozenset[str]) -> tuple[str, bool]:
    """What is wrong with how a logged value was reduced across ranks: (why, decided), or
    ("", False) when nothing is."""
    t = v.taint
    if V.REDUCED in t:
        if V.REDUCED_SUM in t:
            return "summed over the ranks and not divided by the world size", True
        if "double_div_world" in t:
            return "averaged over the ranks and then divided by the world size again", True
        if "reduced_div_unknown" in t:
            divisors = [x.split(":", 2) for x in t if x.startswith(V.SUM_DIVISOR)]
            accum = rc.a.accum
            if divisors and all(
                names_the_count(d[2], _number(d[1]), accum) and accum.style != "none"
                for d in divisors
                if len(d) == 3
            ):
                return (
                    "summed over the ranks and divided only by the accumulation count "
                    f"({divisors[0][2]}), not by the world size",
                    True,
                )
            shown = divisors[0][2] if divisors and len(divisors[0]) == 3 else "a number"
            return f"summed loss divided by {shown}; is that the world size?", False
        return "", False
    # A rank's own value divided by the world size, as if it had been summed over the ranks;
    # a division the trained loss also carries is the loss scaling's, not the log's.
    own = {x for x in t if x.startswith("divworld@")} - trained
    if own:
        at = sorted(own)[0].removeprefix("divworld@")
        return f"is one rank's own value divided by the world size at {at}, never reduced", True
    return "", False


_COLLECTIVES = (
    "all_reduce",
    "reduce",
    "all_reduce_coalesced",
    "all_gather",
    "all_gather_into_tensor",
    "gather",
    "gather_for_metrics",
)


def _conditional_reduction(rc: RuleContext, v: Val) -> Event | None:
    """A collective on the logged value's forward passes that may not run (under an option or
    an ``if`` the scan cannot decide, or on a side the constants it read rule out: ``if
    torch.cuda.device_count() > 1 and False``): the logged value after it may be reduced or
    not, so how it was reduced is not decided."""
    seqs = _forward_seqs([v])
    for e in rc.a.calls():
        if (e.method or apis.last(e.name)) not in _COLLECTIVES:
            continue
        if not seqs & _forward_seqs(list(e.args)):
            continue
        undecided = any(isinstance(c, CondCtx) and c.runs is None for c in e.ctx)
        if (undecided and may_not_run(rc, e)) or any(_ruled_out(c) for c in e.ctx):
            return e
    return None


def _ruled_out(c: object) -> bool:
    """The side of an ``if`` whose test, as the scan expanded it, cannot hold on it."""
    if not isinstance(c, CondCtx):
        return False
    if c.const is not None and bool(c.const) != c.branch:
        return True
    test = c.test
    if isinstance(test, ast.BoolOp):
        fixed = [x.value for x in test.values if isinstance(x, ast.Constant)]
        if c.branch and isinstance(test.op, ast.And) and any(not x for x in fixed):
            return True
        if not c.branch and isinstance(test.op, ast.Or) and any(bool(x) for x in fixed):
            return True
    return False


def _number(s: str) -> object:
    try:
        return int(s)
    except ValueError:
        try:
            return float(s)
        except ValueError:
            return None


def _forward_seqs(vals: list[Val]) -> set[int]:
    return {
        int(t.split(":", 1)[1])
        for v in _logged_values(vals)
        for t in v.taint
        if t.startswith("fwdseq:") and t.split(":", 1)[1].isdigit()
    }


def _reduced_in_place(rc: RuleContext, log: Event, vals: list[Val]) -> bool:
    """Before the log call, ``dist.all_reduce(t)`` on a tensor from the same forward passes
    (``for v in reduced.values(): dist.all_reduce(v)``): the scan cannot tell whether the
    logged copy is the reduced one, so the log is not known to be rank-local."""
    seqs = _forward_seqs(vals)
    if not seqs:
        return False
    for e in rc.a.calls():
        # torch.distributed's collectives work in place; accelerate's reduce() returns a
        # new tensor, whose taint already says whether the log got it.
        library = e.recv is None or e.recv.kind in ("symbol", "module")
        if (
            e.seq < log.seq
            and e.args
            and library
            and apis.last(e.name) in ("all_reduce", "reduce", "all_reduce_coalesced")
            and seqs & _forward_seqs([e.args[0]])
        ):
            return True
    return False


def _evaluation_only(rc: RuleContext, vals: list[Val]) -> bool:
    """Every forward pass the logged values come from runs under no_grad / inference_mode:
    an evaluation loss, not the training loss the rules on logging are about."""
    forwards = [rc.a.by_seq[n] for n in _forward_seqs(vals) if n in rc.a.by_seq]
    return bool(forwards) and all(rc.a.under_no_grad(f) for f in forwards)


def _wrapper_calls(rc: RuleContext, e: Event) -> list[Event]:
    """The calls of the project's own logging helpers that handed a log call its value
    (``print_rank_0(f"loss {loss}")`` -> ``def print_rank_0(msg): ... print(msg)``), innermost
    first: each one's arguments carry a forward pass's value, as the log call's do."""
    funcs = [c for c in e.ctx if isinstance(c, FuncCtx)]
    out: list[Event] = []
    for fc in reversed(funcs):
        found = None
        for call in rc.a.calls_at(fc.call_where):
            if fc.name in (call.method, apis.last(call.name).removeprefix("local:")) and any(
                V.FWD in v.taint for v in [*call.args, *call.kwargs.values()]
            ):
                found = call
                break
        if found is None:
            break
        out.append(found)
    return out


def _accum_scaled(rc: RuleContext, logs: list[Event]) -> tuple[Event, str] | None:
    """A logged loss that still carries the division by the accumulation count (the value that
    went to backward, logged as it is): (the log call, the divisor as written).

    Summing the divided micro-losses over the window gives the window's mean, and a later
    multiplication by the count undoes the division; neither leaves the division on the value
    (a sum starts from the accumulator, whose arithmetic history is its own)."""
    accum = rc.a.accum
    if accum.style in ("none", "framework") or accum.accumulates is False:
        return None
    for e in logs:
        for v in _logged_values([*e.args, *e.kwargs.values()]):
            if V.FWD not in v.taint:
                continue
            divisor = None
            for op in v.ops:
                value = num(op.val) if op.val.known else None
                if not names_the_count(text(op.expr, 200), value, accum):
                    continue
                if _count_inside(op.expr, value, accum):
                    continue  # len(loader) / ACCUM is a number of steps, not the count
                divisor = text(op.expr, 200) if op.op == "div" else None
            if divisor is not None:
                return e, divisor
    return None


def _count_inside(expr: ast.AST, value: object, accum: Accum) -> bool:
    """An expression that only holds the count inside arithmetic with other terms (dividing a
    sum of micro-losses by ``len(loader) / ACCUM`` averages over optimizer steps), unless the
    expression as a whole is the count (its text or its constant value)."""
    if not isinstance(expr, ast.BinOp):
        return False
    whole = (accum.k is not None and value == accum.k) or (
        accum.k_node is not None and text(expr) == text(accum.k_node)
    )
    return not whole


def _logged_values(vals: list[Val]) -> list[Val]:
    """The values a log call receives, with the entries of a dict or a tuple it is handed
    (``log({"train/loss": loss.item()})``)."""
    out: list[Val] = []
    todo = list(vals)
    while todo and len(out) < 64:
        v = todo.pop()
        out.append(v)
        todo.extend(v.items or ())
        todo.extend(item for _, item in v.mapping or ())
    return out


def _names_a_loss(vals: list[Val]) -> bool:
    """A metrics dict built elsewhere and logged by name (``tracking.log(data=metrics)``) whose
    keys name a loss (``{"train/loss": ...}``)."""
    return any(
        "loss" in key.lower() for v in _logged_values(vals) for key, _ in v.mapping or ()
    ) or any(V.LOSS_NAMED in v.taint and V.FWD in v.taint for v in vals)


def _divisor_text(e: Event) -> str:
    for sub in ast.walk(e.node):
        if isinstance(sub, ast.BinOp) and isinstance(sub.op, ast.Div):
            return text(sub.right)
    return "a number"

from __future__ import annotations

import ast
import re

from ddpadvisor.scan import apis
from ddpadvisor.scan import values as V
from ddpadvisor.scan.analysis import text
from ddpadvisor.scan.context import Event
from ddpadvisor.scan.interp import FuncRef
from ddpadvisor.scan.rules.base import RuleContext, lines_at, may_not_run, mentions_world
from ddpadvisor.scan.rules.registry import not_in_excerpt, rule
from ddpadvisor.scan.source import dotted


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
    if hooks and all(may_not_run(rc, e) for e in hooks):
        # ``if args.fp16_grad_sync: model.register_comm_hook(...)``: the run's options decide
        # whether DDP averages by itself or through the hook; neither is certain
        rc.warn(
            f"{hooks[0].where}: a communication hook registered only under an option; not decided"
        )
        return
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

from __future__ import annotations

import ast

from ddpadvisor.scan import values as V
from ddpadvisor.scan.analysis import text
from ddpadvisor.scan.context import CondCtx
from ddpadvisor.scan.library.views import SCRIPT
from ddpadvisor.scan.rules.base import RuleContext, is_rank_cond, lines_at, mentions_world
from ddpadvisor.scan.rules.registry import not_in_excerpt, rule
from ddpadvisor.scan.values import Val


@rule(
    "How the learning rate is scaled with the world size.",
    facts={
        "lr_scaling": not_in_excerpt("none"),
    },
)
def lr_scaling(rc: RuleContext) -> None:
    fw = rc.framework
    said = fw.learning_rate() if fw is not None else SCRIPT
    if said is not SCRIPT:
        if isinstance(said, tuple):
            _lr_value(rc, *said)
        return
    opt = rc._main_optimizer()
    if opt is None:
        return
    lr = opt.kwargs.get("lr")
    groups = [
        e
        for e in rc.a.events
        if e.kind == "assign"
        and e.attr == "lr"
        and e.recv is not None
        and e.recv.kind == "param_group"
    ]
    for g in groups:
        if g.value is not None and V.WORLD in g.value.taint:
            _lr_value(rc, g.value, g.where, "learning rate set per step")
            return
    if lr is None:
        return
    _lr_value(rc, lr, opt.where, "optimizer learning rate")


def _lr_value(rc: RuleContext, lr: Val, where: str, what: str) -> None:
    fact = "lr_scaling"
    if V.WORLD in lr.taint:
        sites = lines_at(lr.taint, "scaled") or [where]
        at = sites[-1]
        kind = "sqrt" if "sqrt_world" in lr.taint else "linear"
        if _switched(rc, sites, kind):
            return
        rc.emit(
            fact,
            kind,
            at,
            f"learning rate scaled by {'sqrt(world size)' if kind == 'sqrt' else 'the world size'} ({at})",
        )
    elif V.UNBOUND in lr.taint:
        rc.warn(f"{where}: learning rate comes from a parameter; scaling not decided")


def _enclosing_ifs(rc: RuleContext, at: str) -> list[tuple[ast.If, bool]]:
    """The ``if`` statements around a line, innermost first, with the side it is on."""
    file, _, line_text = at.rpartition(":")
    if not line_text.isdigit():
        return []
    line = int(line_text)
    sources = rc.walk.sources
    module = next((m for m in [sources.main, *sources.modules.values()] if m.label == file), None)
    if module is None:
        return []
    out = []
    for node in ast.walk(module.tree):
        if isinstance(node, ast.If) and node.lineno <= line <= (node.end_lineno or 0):
            last = node.body[-1]
            out.append((node, node.body[0].lineno <= line <= (last.end_lineno or last.lineno)))
    return sorted(out, key=lambda item: -item[0].lineno)


def _switched(rc: RuleContext, sites: list[str], kind: str) -> bool:
    """A world-size scaling written under an ``if`` that a run's option decides
    (diffusers' ``if args.scale_lr:``, MAE's ``if args.lr is None:``) is the default's, not
    the code's: a --set note when the default runs it, else a warning. Every line that
    multiplies the scaled rate is a site; one under an option decides, then one under no
    ``if`` (the scaling always runs), and sites all under other ``if`` s leave it open.
    True when handled."""
    conds = {id(c.node): c for e in rc.a.events for c in e.ctx if isinstance(c, CondCtx)}
    open_test: tuple[str, str] | None = None
    unconditional = False
    for at in sites:
        switch = _switch_at(rc, at, conds)
        if switch is None:
            unconditional = True
            continue
        node, body, c = switch
        test = text(node.test)
        if c is not None and (V.ARGDEFAULT in c.taint or "cli" in c.taint) and c.const is not None:
            if bool(c.const) == body:
                rc.cli_default("lr_scaling", kind, at)
            else:
                rc.warn(
                    f"{at}: learning rate scaled by the world size only when {test} "
                    "(not by default); lr_scaling not decided"
                )
            return True
        open_test = open_test or (at, test)
    if unconditional or open_test is None:
        return False
    at, test = open_test
    rc.warn(f"{at}: learning rate scaled by the world size only when {test}; not decided")
    return True


def _switch_at(
    rc: RuleContext, at: str, conds: dict[int, CondCtx]
) -> tuple[ast.If, bool, CondCtx | None] | None:
    """The innermost ``if`` around a line that is a switch (not a rank or world-size test)."""
    for node, body in _enclosing_ifs(rc, at):
        c = conds.get(id(node))
        if c is not None and (is_rank_cond(c) or V.WORLD in c.taint):
            continue  # both sides run in the same job, on different ranks or sizes
        if c is None and mentions_world(node.test):
            continue
        return node, body, c
    return None

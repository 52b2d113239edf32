from __future__ import annotations

import ast

from ddpadvisor.scan import values as V
from ddpadvisor.scan.context import Event, FuncCtx
from ddpadvisor.scan.rules.base import RuleContext, cli_switched
from ddpadvisor.scan.rules.data._shared import _mentions_rank, _seed_calls
from ddpadvisor.scan.rules.registry import ANY_EXCERPT, rule


@rule(
    "Whether every rank seeds its random generators alike.",
    facts={
        "rank_seeds_identical": ANY_EXCERPT,
    },
)
def seeding(rc: RuleContext) -> None:
    seeds = _seed_calls(rc)
    if not seeds:
        return
    ranked = [e for e in seeds if any(V.RANK in v.taint for v in [*e.args, *e.kwargs.values()])]
    if ranked:
        rc.emit(
            "rank_seeds_identical",
            False,
            ranked[0].where,
            f"seed offset by rank ({ranked[0].where})",
        )
        return
    passed = [e for e in seeds if _rank_passed_in(rc, e)]
    if passed:
        # ``set_seed(cfg["seed"] + cfg["rank"])`` with a rank the scan lost in a config
        # dict: the helper's seed is not known to be the same on every rank
        rc.warn(
            f"{passed[0].where}: the seed is handed in by a call that names the rank; not decided"
        )
        return
    if all(cli_switched(e) for e in seeds):
        e = seeds[0]
        rc.warn(f"{e.where}: seeding runs only when a command-line option asks for it")
        return
    if all(
        any(v.known or V.ARGDEFAULT in v.taint for v in [*e.args, *e.kwargs.values()])
        for e in seeds
    ):
        e = seeds[0]
        rc.emit("rank_seeds_identical", True, e.where, f"same seed on every rank ({e.where})")


def _rank_passed_in(rc: RuleContext, e: Event) -> bool:
    """The seed call's arguments, or the arguments a call of the helper it sits in passes
    to the parameters the seed is made of, name the rank (or a rank-named key): the value
    the scan reads may have lost it on the way."""
    if not isinstance(e.node, ast.Call):
        return False
    given = [*e.node.args, *(k.value for k in e.node.keywords)]
    if any(_names_rank(a) for a in given):
        return True
    funcs = [c for c in e.ctx if isinstance(c, FuncCtx) and c.call_where]
    if not funcs:
        return False
    inner = funcs[-1]
    fn = _function_at(rc, inner.file, inner.line)
    if fn is None:
        return False
    used = {n.id for a in given for n in ast.walk(a) if isinstance(n, ast.Name)}
    params = [a.arg for a in [*fn.args.posonlyargs, *fn.args.args]]
    for call in rc.a.calls_at(inner.call_where):
        node = call.node
        if not isinstance(node, ast.Call):
            continue
        shift = (
            1 if params[:1] in (["self"], ["cls"]) and isinstance(node.func, ast.Attribute) else 0
        )
        for i, arg in enumerate(node.args):
            j = i + shift
            if j < len(params) and params[j] in used and _names_rank(arg):
                return True
        if any(k.arg in used and _names_rank(k.value) for k in node.keywords):
            return True
    return False


def _names_rank(node: ast.AST) -> bool:
    return _mentions_rank(node) or any(
        isinstance(sub, ast.Constant) and isinstance(sub.value, str) and "rank" in sub.value
        for sub in ast.walk(node)
    )


def _function_at(
    rc: RuleContext, label: str, line: int
) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    sources = rc.walk.sources
    for m in [sources.main, *sources.modules.values()]:
        if m.label != label:
            continue
        for node in ast.walk(m.tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.lineno == line:
                return node
    return None

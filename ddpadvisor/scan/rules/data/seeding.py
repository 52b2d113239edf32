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
    """The seed call, or a call of the helper it sits in, writes the rank (or a rank-named
    key) into its arguments: the value the scan reads may have lost it on the way."""
    nodes: list[ast.AST] = [e.node]
    for c in e.ctx:
        if isinstance(c, FuncCtx) and c.call_where:
            nodes += [call.node for call in rc.a.calls_at(c.call_where)]
    for node in nodes:
        if not isinstance(node, ast.Call):
            continue
        for arg in [*node.args, *(k.value for k in node.keywords)]:
            if _mentions_rank(arg) or any(
                isinstance(sub, ast.Constant) and isinstance(sub.value, str) and "rank" in sub.value
                for sub in ast.walk(arg)
            ):
                return True
    return False

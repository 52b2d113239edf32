from __future__ import annotations

from ddpadvisor.scan import values as V
from ddpadvisor.scan.rules.base import RuleContext, cli_switched
from ddpadvisor.scan.rules.data._shared import _seed_calls
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

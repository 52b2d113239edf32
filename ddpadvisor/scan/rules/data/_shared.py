"""Helpers that several rules of data share."""

from __future__ import annotations

import ast

from ddpadvisor.scan import apis
from ddpadvisor.scan import values as V
from ddpadvisor.scan.context import Event
from ddpadvisor.scan.rules.base import RuleContext


def _mentions_rank(node: ast.AST) -> bool:
    for sub in ast.walk(node):
        name = (
            sub.id
            if isinstance(sub, ast.Name)
            else sub.attr
            if isinstance(sub, ast.Attribute)
            else None
        )
        if name and (
            name
            in (
                "rank",
                "local_rank",
                "get_rank",
                "world_size",
                "num_replicas",
                "process_index",
                "get_world_size",
            )
        ):
            return True
    return False


def _seed_calls(rc: RuleContext) -> list[Event]:
    """Calls that seed the process's random generators (``torch.manual_seed``, a project's
    ``set_seed``), and a ``torch.Generator``'s ``manual_seed`` where that generator feeds a
    DataLoader (its shuffling and its workers' seeds); a generator of its own used elsewhere
    (sampling text for a preview) leaves the training RNG as it was."""
    fed = {
        v.ref
        for o in rc.a.objs(V.LOADER, V.SAMPLER, V.DSAMPLER)
        for v in [*o.kwargs.values(), *o.args]
        if v.kind == V.RNG
    }
    return [
        e
        for e in rc.a.calls()
        if apis.last(e.name)
        in ("manual_seed", "seed", "set_seed", "seed_everything", "manual_seed_all")
        and (
            e.recv is None
            or e.recv.kind in (None, "symbol")
            or (e.recv.kind == V.RNG and e.recv.ref in fed)
        )
    ]

"""Helpers that several rules of data share."""

from __future__ import annotations

import ast

from ddpadvisor.scan import apis
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
    return [
        e
        for e in rc.a.calls()
        if apis.last(e.name)
        in ("manual_seed", "seed", "set_seed", "seed_everything", "manual_seed_all")
        and not (e.recv is not None and e.recv.kind is not None and e.recv.kind not in ("symbol",))
    ]

"""``--set FACT=VALUE`` (repeatable): one answer each, above an answers file."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ddpadvisor.evidence.sources.base import Flag, Source

if TYPE_CHECKING:
    from ddpadvisor.kb.model import KnowledgeBase
    from ddpadvisor.observation import Gathered


def read_all(kb: KnowledgeBase, items: Sequence[str], request: Any) -> Gathered:
    from ddpadvisor.evidence.answers import read_sets

    return read_sets(kb, list(items))


def read(kb: KnowledgeBase, item: str) -> Gathered:
    return read_all(kb, [item], None)


SOURCE = Source(
    name="set",
    field="sets",
    observes="set",
    precedence=1,
    flags=(
        Flag(
            "--set",
            "FACT=VALUE",
            "one answer; repeatable; 'unknown' leaves the fact unobserved",
            path=False,
        ),
    ),
    read=read,
    read_all=read_all,
    summary="one answer on the command line",
)

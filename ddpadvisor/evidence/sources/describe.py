"""``--describe FILE``: the user's own description or forum post (English or Chinese)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ddpadvisor.evidence.sources.base import Flag, Source

if TYPE_CHECKING:
    from ddpadvisor.kb.model import KnowledgeBase
    from ddpadvisor.observation import Gathered


def read(kb: KnowledgeBase, path: Path) -> Gathered:
    from ddpadvisor.evidence.intake import read_description
    from ddpadvisor.yamlio import read_description_text

    # Refuses, before the reader opens it, what is not a regular file of bounded size (a FIFO
    # would block, /dev/zero never ends) and what says nothing at all.
    read_description_text(path)
    return read_description(kb, path)


SOURCE = Source(
    name="describe",
    field="describe",
    observes="description",
    precedence=-1,
    flags=(
        Flag(
            "--describe",
            "FILE",
            "your own description or forum post (English or Chinese), read for facts",
        ),
    ),
    read=read,
    summary="phrases that state a fact become answers; the text is compared with each cause",
    kinds=("describe",),
)

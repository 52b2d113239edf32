"""``--answers FILE`` (YAML or JSON, fact id -> value)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ddpadvisor.evidence.sources.base import Flag, Source

if TYPE_CHECKING:
    from ddpadvisor.kb.model import KnowledgeBase
    from ddpadvisor.observation import Gathered


def read(kb: KnowledgeBase, path: Path) -> Gathered:
    from ddpadvisor.evidence.answers import read_answer_file

    return read_answer_file(kb, path)


SOURCE = Source(
    name="answers",
    field="answers",
    observes="answer",
    precedence=0,
    flags=(Flag("--answers", "FILE", "YAML/JSON mapping of fact id to value"),),
    read=read,
    summary="your answers, fact id -> value",
    kinds=("answers",),
)

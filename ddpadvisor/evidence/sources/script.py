"""``--script FILE``: the training script, scanned statically (never executed)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ddpadvisor.evidence.sources.base import Flag, Source

if TYPE_CHECKING:
    from ddpadvisor.kb.model import KnowledgeBase
    from ddpadvisor.observation import Gathered


def read(kb: KnowledgeBase, path: Path) -> Gathered:
    from ddpadvisor.evidence.script_scan import scan_script

    return scan_script(kb, path)


SOURCE = Source(
    name="script",
    field="scripts",
    observes="script",
    precedence=2,
    flags=(Flag("--script", "FILE", "training script to scan statically (never executed)"),),
    read=read,
    summary="what the code shows, read with ast (never run)",
    kinds=("script",),
)

"""``--script FILE``: the training script, scanned statically (never executed)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ddpadvisor.evidence.sources.base import Flag, Source

if TYPE_CHECKING:
    from ddpadvisor.kb.model import KnowledgeBase
    from ddpadvisor.observation import Gathered


def given_facts(kb: KnowledgeBase, request: Any) -> dict[str, object]:
    """What the user's answers (``--answers``, ``--set``) and attached files (``--attach``) say,
    for the scan's rules: a rule that stops at a value the code leaves open (a command-line
    default, an unread config) reads on with the run's value. Later sources win, as in the
    engine. Their own readers report bad input; here it only means nothing is given."""
    from ddpadvisor.errors import InputError
    from ddpadvisor.evidence.sources import answers, attach, sets

    out: dict[str, object] = {}
    if request is None:
        return out
    steps = (
        (answers.SOURCE, getattr(request, "answers", [])),
        (sets.SOURCE, getattr(request, "sets", [])),
        (attach.SOURCE, getattr(request, "attach", [])),
    )
    for source, values in steps:
        if not values:
            continue
        try:
            got = source.gather(kb, values, request)
        except (InputError, OSError, ValueError):
            continue
        for obs in got.observations:
            out[obs.fact] = obs.value
    return out


def read_all(kb: KnowledgeBase, paths: Sequence[Path], request: Any) -> Gathered:
    from ddpadvisor.evidence.script_scan import scan_script
    from ddpadvisor.observation import Gathered

    given = given_facts(kb, request)
    out = Gathered()
    for path in paths:
        out.extend(scan_script(kb, path, given))
    return out


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
    read_all=read_all,
    summary="what the code shows, read with ast (never run)",
    kinds=("script",),
)

"""``--script train.py``: facts read statically from the training script.

The script is parsed with :mod:`ast` only (see :mod:`ddpadvisor.scan`); it is never imported
or executed, and neither are the sibling modules it imports.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ddpadvisor.kb.model import KnowledgeBase
from ddpadvisor.kb.values import ValueProblem, parse_value
from ddpadvisor.observation import Gathered, Observation
from ddpadvisor.scan import scan_file
from ddpadvisor.yamlio import check_input_file


def scan_script(
    kb: KnowledgeBase, path: Path, given: Mapping[str, object] | None = None
) -> Gathered:
    """``given``: fact values other evidence supplies, read by rules where the code leaves a
    value open (see :func:`ddpadvisor.scan.scan_file`); they are not re-observed here."""
    check_input_file(path)  # a FIFO or /proc/kmsg would block the scanner's read
    result = scan_file(path, given=given)
    out = Gathered(warnings=list(result.warnings))
    for finding in result.findings:
        fact = kb.facts.get(finding.fact)
        if fact is None:
            continue  # a fact this KB does not define: nothing can use it
        try:
            value = parse_value(fact, finding.value)
        except ValueProblem as exc:
            out.warnings.append(f"{finding.where}: scanner value ignored: {exc}")
            continue
        if value is None:
            continue
        out.observations.append(
            Observation(
                fact=finding.fact,
                value=value,
                source="script",
                where=finding.where,
                detail=finding.detail,
            )
        )
    return out

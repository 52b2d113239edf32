"""Collect observations from every source named on the command line (or in the TUI).

The sources and their order come from the registry (:mod:`ddpadvisor.evidence.sources`); each
source's reader is imported only when used, so ``--json --answers`` never imports torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ddpadvisor.evidence.sources import ORDER
from ddpadvisor.kb.model import KnowledgeBase
from ddpadvisor.observation import Gathered


@dataclass
class Sources:
    """What each source was given, one list per source (its ``field`` in the registry)."""

    answers: list[Path] = field(default_factory=list)
    sets: list[str] = field(default_factory=list)
    scripts: list[Path] = field(default_factory=list)
    traces: list[Path] = field(default_factory=list)
    probe_results: list[Path] = field(default_factory=list)
    describe: list[Path] = field(default_factory=list)  # free-text descriptions (intake)
    attach: list[str] = field(default_factory=list)  # [KIND:]FILE: logs, configs, dumps
    reference_logs: list[str] = field(default_factory=list)  # a good run's log, compared


def gather(kb: KnowledgeBase, sources: Sources) -> Gathered:
    """Order matters only within a precedence level: later wins, so --set follows --answers."""
    out = Gathered()
    for source in ORDER:
        values = getattr(sources, source.field)
        if values:
            out.extend(source.gather(kb, values, sources))
    if out.warnings and (sources.scripts or sources.traces):  # only a scan writes them
        _drop_settled_cli_defaults(out)
    return out


def _drop_settled_cli_defaults(out: Gathered) -> None:
    """A scanned value known only as a command-line default is a warning asking for --set;
    where the trace measured the fact or the user gave it, the warning is moot."""
    from ddpadvisor.scan.rules.base import cli_default_fact

    known = {o.fact for o in out.observations}
    out.warnings = [w for w in out.warnings if cli_default_fact(w) not in known]

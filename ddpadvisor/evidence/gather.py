"""Collect observations from every source named on the command line (or in the TUI).

Each source module is imported only when used, so ``--json --answers`` never imports torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ddpadvisor.kb.model import KnowledgeBase
from ddpadvisor.observation import Gathered


@dataclass
class Sources:
    answers: list[Path] = field(default_factory=list)
    sets: list[str] = field(default_factory=list)
    scripts: list[Path] = field(default_factory=list)
    traces: list[Path] = field(default_factory=list)
    probe_results: list[Path] = field(default_factory=list)
    describe: list[Path] = field(default_factory=list)  # free-text descriptions (intake)


def gather(kb: KnowledgeBase, sources: Sources) -> Gathered:
    """Order matters only within a precedence level: later wins, so --set follows --answers."""
    out = Gathered()
    # A description first: an answers file and --set override what the text suggested.
    if sources.describe:
        from ddpadvisor.evidence.intake import read_description

        for path in sources.describe:
            out.extend(read_description(kb, path))
    if sources.answers:
        from ddpadvisor.evidence.answers import read_answer_file

        for path in sources.answers:
            out.extend(read_answer_file(kb, path))
    if sources.sets:
        from ddpadvisor.evidence.answers import read_sets

        out.extend(read_sets(kb, sources.sets))
    if sources.scripts:
        from ddpadvisor.evidence.script_scan import scan_script

        for path in sources.scripts:
            out.extend(scan_script(kb, path))
    if sources.probe_results:
        from ddpadvisor.evidence.probe_results import read_probe_results

        for path in sources.probe_results:
            out.extend(read_probe_results(kb, path))
    if sources.traces:
        from ddpadvisor.evidence.trace_reader import read_trace

        for path in sources.traces:
            out.extend(read_trace(kb, path))
    return out

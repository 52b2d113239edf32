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
        from ddpadvisor.yamlio import read_description_text

        for path in sources.describe:
            # Refuses, before the reader opens it, what is not a regular file of bounded size
            # (a FIFO would block, /dev/zero never ends) and what says nothing at all.
            read_description_text(path)
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
        from ddpadvisor.evidence.trace import read_trace

        traced = [read_trace(kb, path) for path in sources.traces]
        named = {p.resolve() for p in sources.scripts}
        for path in sources.traces:  # the traced script too, below the trace in precedence
            _scan_traced_script(kb, path, named, out)
        for got in traced:
            out.extend(got)
    if out.warnings and (sources.scripts or sources.traces):  # only a scan writes them
        _drop_settled_cli_defaults(out)
    return out


def _drop_settled_cli_defaults(out: Gathered) -> None:
    """A scanned value known only as a command-line default is a warning asking for --set;
    where the trace measured the fact or the user gave it, the warning is moot."""
    from ddpadvisor.scan.rules.base import cli_default_fact

    known = {o.fact for o in out.observations}
    out.warnings = [w for w in out.warnings if cli_default_fact(w) not in known]


def _scan_traced_script(kb: KnowledgeBase, trace: Path, named: set[Path], out: Gathered) -> None:
    """``--trace DIR`` also scans the script the trace ran (its command line is in the trace),
    unless ``--script`` named it already; says so, or why not, in a warning."""
    from ddpadvisor.errors import InputError
    from ddpadvisor.evidence.script_scan import scan_script
    from ddpadvisor.evidence.trace import traced_script

    script, why = traced_script(trace)
    if script is None:
        out.warnings.append(f"trace {trace}: the traced script was not scanned: {why}")
        return
    if script.resolve() in named:
        return
    if named:
        out.warnings.append(
            f"trace {trace}: the job ran {script}, not the script --script names; both are "
            "scanned, so their findings and warnings may repeat"
        )
    named.add(script.resolve())
    try:
        got = scan_script(kb, script)
    except InputError as exc:
        out.warnings.append(f"trace {trace}: the traced script was not scanned: {exc.one_line()}")
        return
    out.extend(got)
    out.warnings.append(
        f"trace {trace}: also scanned the traced script {script} (from the trace's command "
        "line); the trace's measurements take precedence"
    )

"""Static scan of a training script: DDP faults read from the code, never by running it.

``scan_file(path)`` parses the script (and sibling modules it imports) with :mod:`ast`,
walks it in program order (:mod:`.interp`, with library calls from :mod:`.library`), recovers
the training step and accumulation window (:mod:`.analysis`) and turns them into fact values
with locations (the rules listed in :data:`.rules.RULES`). See ``README.md`` here.
Nothing here imports torch or the scanned code.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ddpadvisor.scan.rules.base import Finding

if TYPE_CHECKING:
    from ddpadvisor.scan.source import SourceSet

__all__ = ["Finding", "ScanResult", "scan_file"]


@dataclass
class ScanResult:
    findings: list[Finding] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    framework: str | None = None

    def value(self, fact: str) -> object | None:
        """The decided value of a fact, or None when the scan left it unknown."""
        for f in reversed(self.findings):
            if f.fact == fact:
                return f.value
        return None


def _consolidate(findings: list[Finding]) -> list[Finding]:
    """One value per fact (the last decided one), every distinct location that shows it."""
    final: dict[str, object] = {}
    for f in findings:
        final[f.fact] = f.value
    out: list[Finding] = []
    seen: set[tuple[str, str]] = set()
    for f in findings:
        if f.value != final[f.fact] or (f.fact, f.where) in seen:
            continue
        seen.add((f.fact, f.where))
        out.append(f)
    return out


# Conditional bindings read the other way, one walk each (see Statements._join): those that
# bind another function, class or object first, then constants, in the order met. A walk
# costs about as much as the first scan; the cap keeps a script with many switches fast.
MAX_SITES = 8


def scan_file(path: Path, *, strict: bool = False) -> ScanResult:
    """Scan one script. Raises :class:`ddpadvisor.errors.InputError` for unreadable input."""
    from ddpadvisor.scan.interp import Walker
    from ddpadvisor.scan.rules import run_rules
    from ddpadvisor.scan.source import load

    sources = load(Path(path))
    walker = Walker(sources)
    walk = walker.run()
    rules = run_rules(walk, strict=strict)
    findings = _consolidate(rules.findings)
    warnings = list(dict.fromkeys([*walk.warnings, *rules.warnings]))
    findings, contested = _contested(findings, walker.sites, walker.opaque_sites, sources, strict)
    warnings.extend(w for w in contested if w not in warnings)
    return ScanResult(findings, warnings, rules.a.framework)


def _contested(
    findings: list[Finding],
    sites: list[tuple[str, int, str]],
    opaque: set[tuple[str, int, str]],
    sources: SourceSet,
    strict: bool,
) -> tuple[list[Finding], list[str]]:
    """Drop the facts that another reading of a conditional binding decides differently.

    ``if cond: loader_fn = other_loader`` with ``cond`` undecided: the script may run either
    function. Each such binding is walked once the other way; a fact both readings decide
    alike stays, a fact they decide differently is left undecided with a warning, and a fact
    only the main reading decides stays (the other reading saw less, not something else),
    unless the other value is data from code the scan does not read (``accum = CONFIG``
    from an unread module): then the fact is not known either way."""
    from ddpadvisor.scan.interp import Walker
    from ddpadvisor.scan.rules import run_rules

    final = {f.fact: f.value for f in findings}
    dropped: dict[str, str] = {}
    for site in sites[:MAX_SITES]:
        walk = Walker(sources, flip=frozenset({site})).run()
        other = {f.fact: f.value for f in run_rules(walk, strict=strict).findings}
        label, line, name = site
        for fact, value in final.items():
            if fact in dropped:
                continue
            if fact in other and other[fact] != value:
                dropped[fact] = (
                    f"{label}:{line}: {fact} depends on which side of this if binds {name} "
                    f"({_shown(value)} one way, {_shown(other[fact])} the other); left undecided"
                )
            elif fact not in other and site in opaque:
                dropped[fact] = (
                    f"{label}:{line}: {fact} is {_shown(value)} on one side of this if only; "
                    f"on the other, {name} comes from code the scan does not read; "
                    "left undecided"
                )
    notes = list(dropped.values())
    if len(sites) > MAX_SITES:
        label, line, name = sites[MAX_SITES]
        notes.append(
            f"{label}:{line}: {len(sites) - MAX_SITES} more conditional bindings (from {name} "
            "on) were not read the other way; facts they decide may hold one way only"
        )
    kept = [f for f in findings if f.fact not in dropped]
    return kept, notes


def _shown(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)

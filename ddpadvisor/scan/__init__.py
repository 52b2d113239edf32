"""Static scan of a training script: DDP faults read from the code, never by running it.

``scan_file(path)`` parses the script (and sibling modules it imports) with :mod:`ast`,
walks it in program order (:mod:`.interp`, with library calls from :mod:`.library`), recovers
the training step and accumulation window (:mod:`.analysis`) and turns them into fact values
with locations (the rules listed in :data:`.rules.RULES`). See ``README.md`` here.
Nothing here imports torch or the scanned code.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ddpadvisor.scan.rules.base import Finding

if TYPE_CHECKING:
    from ddpadvisor.scan.source import SourceSet

__all__ = ["Finding", "ScanResult", "scan_excerpt", "scan_file"]


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
# costs about as much as the first scan; the cap keeps a script with many switches fast, and
# so does a cap on the statements all of them walk together (a script that imports a large
# package walks thousands of statements each time).
MAX_SITES = 8
SITE_STATEMENTS = 40_000


def scan_file(
    path: Path, *, strict: bool = False, given: Mapping[str, object] | None = None
) -> ScanResult:
    """Scan one script. Raises :class:`ddpadvisor.errors.InputError` for unreadable input.

    ``given``: fact values the run's other evidence supplies (``--set``, an answers file, an
    attached config). A rule that stopped at a value the code leaves open (a command-line
    default such as ``--accum_iter 1``) reads on with the given one; see ``RuleContext.given``.
    """
    from ddpadvisor.scan.source import load

    return _scan(load(Path(path)), strict, given)


# In an excerpt that never shows the wrap, the model it trains under DDP is taken to be the
# wrapped one when it goes by one of these names (its role guessed from its name, as for an
# unpassed parameter); nothing is concluded from the assumed wrap itself.
WRAPPED_NAMES = ("ddp_model", "model", "net", "network")  # the first one used is wrapped
_WRAPPERS = {
    "DDP", "DistributedDataParallel", "FSDP", "FullyShardedDataParallel", "fully_shard",
    "Trainer", "SFTTrainer", "Accelerator", "prepare", "initialize", "setup",
}  # fmt: skip


def _assumed_wrap(code: str) -> str | None:
    """The name to wrap in DDP before an excerpt's first line, or None."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    used: set[str] = set()
    assigned: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in _WRAPPERS:
                return None
        elif isinstance(node, ast.Name):
            (assigned if isinstance(node.ctx, ast.Store) else used).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            assigned.update(a.arg for a in node.args.args)
    return next((n for n in WRAPPED_NAMES if n in used and n not in assigned), None)


MICRO_STEP = re.compile(r"micro|accum", re.I)


def _assumed_step(code: str) -> bool:
    """An excerpt that ends after its micro-step loop (``for micro_step in
    range(grad_accum_steps): ... backward()``) without the optimizer step: the step follows."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    names = {
        n.func.attr
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
    }
    if "step" in names or "backward" not in names:
        return False
    for loop in tree.body:
        if not isinstance(loop, ast.For) or not isinstance(loop.iter, ast.Call):
            continue
        if getattr(loop.iter.func, "id", "") != "range":
            continue
        said = [ast.unparse(loop.target), *(ast.unparse(a) for a in loop.iter.args)]
        if any(MICRO_STEP.search(x) for x in said):
            return True
    return False


def scan_excerpt(code: str, label: str = "excerpt", *, strict: bool = False) -> ScanResult:
    """Scan a piece of a script (code pasted into a forum post), keeping only the findings an
    excerpt can show (:data:`ddpadvisor.scan.rules.EXCERPT_CANNOT_SHOW`): a value decided by
    the absence of code elsewhere ("torch.compile is not used") means nothing in an excerpt.
    Raises :class:`ddpadvisor.errors.InputError` when the code does not parse."""
    from ddpadvisor.scan.rules import EXCERPT_CANNOT_SHOW, EXCERPT_SHOWN_WITH
    from ddpadvisor.scan.source import load_excerpt

    wrap = _assumed_wrap(code)
    shift = 0
    last = code.count("\n") + 1  # lines past this one were added, not pasted
    if _assumed_step(code):
        code = f"{code.rstrip()}\noptimizer.step()\n"
        last = code.count("\n") - 1
    if wrap is not None:
        code = f"{wrap} = DistributedDataParallel({wrap})\n{code}"
        shift = 1
    result = _scan(load_excerpt(code, label), strict)
    kept: list[Finding] = []
    shown = {f.fact for f in result.findings if f.value is True}
    for f in result.findings:
        hidden = EXCERPT_CANNOT_SHOW.get(f.fact)
        if hidden is None:
            continue
        if f.value in hidden and EXCERPT_SHOWN_WITH.get(f.fact) not in shown:
            continue
        where, _, line = f.where.rpartition(":")
        if not line.isdigit() or not shift < int(line) <= shift + last:
            continue  # found at the assumed wrap or step, not in the user's code
        kept.append(Finding(f.fact, f.value, f"{where}:{int(line) - shift}", f.detail))
    result.findings = kept
    return result


def _scan(
    sources: SourceSet, strict: bool, given: Mapping[str, object] | None = None
) -> ScanResult:
    from ddpadvisor.scan.interp import Walker
    from ddpadvisor.scan.rules import run_rules

    walker = Walker(sources)
    walk = walker.run()
    rules = run_rules(walk, strict=strict, given=given)
    findings = _consolidate(rules.findings)
    warnings = list(dict.fromkeys([*walk.warnings, *rules.warnings]))
    walked = max(1, walker.walked_statements)
    cap = max(2, min(MAX_SITES, SITE_STATEMENTS // walked))
    findings, contested = _contested(
        findings, walker.sites, walker.opaque_sites, sources, strict, cap, given
    )
    warnings.extend(w for w in contested if w not in warnings)
    return ScanResult(findings, warnings, rules.a.framework)


def _contested(
    findings: list[Finding],
    sites: list[tuple[str, int, str]],
    opaque: set[tuple[str, int, str]],
    sources: SourceSet,
    strict: bool,
    cap: int = MAX_SITES,
    given: Mapping[str, object] | None = None,
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
    # One reading per if, with every name it binds flipped together (the other side binds
    # them all); first the ifs in the files that decided facts (the script, the package
    # module that holds the training step), then those of other modules (a package's
    # import-time plumbing), each in the order met.
    groups: dict[tuple[str, int], list[tuple[str, int, str]]] = {}
    for site in sites:
        groups.setdefault((site[0], site[1]), []).append(site)
    deciding = {f.where.rpartition(":")[0] for f in findings} | {sources.main.label}
    ordered = sorted(groups.values(), key=lambda group: group[0][0] not in deciding)
    for group in ordered[:cap]:
        walk = Walker(sources, flip=frozenset(group)).run()
        other = {f.fact: f.value for f in run_rules(walk, strict=strict, given=given).findings}
        label, line, _ = group[0]
        names = ", ".join(name for _, _, name in group)
        unread = [site[2] for site in group if site in opaque]
        # ``(A if test else B)(...)``: the class (or function) called is one of two the scan
        # reads in full; a fact one of them decides and the other does not is not known
        picked = [site[2] for site in group if site[2].startswith("<")]
        for fact, value in final.items():
            if fact in dropped:
                continue
            if fact in other and other[fact] != value:
                dropped[fact] = (
                    f"{label}:{line}: {fact} depends on which side of this if binds {names} "
                    f"({_shown(value)} one way, {_shown(other[fact])} the other); left undecided"
                )
            elif fact not in other and unread:
                dropped[fact] = (
                    f"{label}:{line}: {fact} is {_shown(value)} on one side of this if only; "
                    f"on the other, {unread[0]} comes from code the scan does not read; "
                    "left undecided"
                )
            elif fact not in other and picked:
                dropped[fact] = (
                    f"{label}:{line}: {fact} is {_shown(value)} with one side of "
                    f"{picked[0]} and not decided with the other; left undecided"
                )
    notes = list(dropped.values())
    if len(ordered) > cap:
        label, line, name = ordered[cap][0]
        notes.append(
            f"{label}:{line}: {len(ordered) - cap} more conditional bindings (from {name} "
            "on) were not read the other way; facts they decide may hold one way only"
        )
    kept = [f for f in findings if f.fact not in dropped]
    return kept, notes


def _shown(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)

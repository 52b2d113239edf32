"""Cross-entry checks of a merged KB: dangling ids, ill-typed predicates, missing fixes/tests."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import TYPE_CHECKING

from ddpadvisor.bundled import probe_catalog
from ddpadvisor.kb.model import CATCH_ALL
from ddpadvisor.kb.values import (
    ValueProblem,
    classes,
    option_labels,
    option_values,
    parse_value,
    predicate_classes,
)
from ddpadvisor.yamlio import read_text

if TYPE_CHECKING:
    from collections.abc import Callable

    from ddpadvisor.kb.model import KnowledgeBase
    from ddpadvisor.kb.schema import Fact

# Subcommands a fix's verify command may name (kept in sync with cli.py by a test).
SUBCOMMANDS = {"trace", "probe", "kb", "schema", "report", "claims", "ask"}
# Probes in probes/ (checked against the folder by a test).


def value_problem(fact: Fact, raw: object) -> str | None:
    """Why ``raw`` is no value of ``fact`` (the rule-file checks all word it so), or None."""
    try:
        parse_value(fact, raw)
    except ValueProblem as exc:
        return str(exc)
    return None


def check_references(kb: KnowledgeBase) -> None:
    from ddpadvisor.kb.model import Problem

    def problem(kind: str, id_: str, msg: str) -> None:
        kb.problems.append(Problem(kb.origin(kind, id_), msg))

    if CATCH_ALL in kb.causes:
        problem("causes", CATCH_ALL, f"cause id {CATCH_ALL!r} is reserved for the catch-all")

    for fact in kb.facts.values():
        if fact.healthy:
            labels = classes(fact)
            for label in fact.healthy:
                if label not in labels:
                    problem(
                        "facts",
                        fact.id,
                        f"fact {fact.id!r}: healthy class {label!r} is not "
                        f"one of {', '.join(labels)}",
                    )
            if sum(fact.healthy.values()) > 1.0 + 1e-9:
                problem("facts", fact.id, f"fact {fact.id!r}: healthy probabilities sum above 1")

    for fact in kb.facts.values():

        def fact_problem(msg: str, fid: str = fact.id) -> None:
            problem("facts", fid, msg)

        check_interview(kb, fact, fact_problem)

    def check_links(
        kind: str, owner: str, links: list, *, allow_p: bool, mode: str | None = None
    ) -> None:
        """``owner``'s links; ``mode``: they are one of the owner's modes (named in messages)."""
        name = owner if mode is None else f"{owner}/{mode}"
        for link in links:
            fact = kb.facts.get(link.fact)
            if fact is None:
                problem(kind, owner, f"{kind[:-1]} {name!r}: unknown fact id {link.fact!r}")
                continue
            if link.p is not None and not allow_p:
                problem(
                    kind,
                    owner,
                    f"{kind[:-1]} {name!r}: links of a mechanism take 'strength', not 'p'",
                )
            try:
                sel = predicate_classes(fact, link)
            except ValueProblem as exc:
                problem(kind, owner, f"{kind[:-1]} {name!r}: {exc}")
                continue
            if not sel or len(sel) == len(classes(fact)):
                problem(
                    kind,
                    owner,
                    f"{kind[:-1]} {name!r}: the predicate on {link.fact!r} "
                    "holds for no value or for every value, so it carries no evidence",
                )

    for mech in kb.mechanisms.values():
        check_links("mechanisms", mech.id, mech.evidence, allow_p=False)

    tested = set()
    for test in kb.tests:
        if test.expect_top:
            tested.add(test.expect_top)
        tested.update(test.expect_in_top)

    for cause in kb.causes.values():
        check_links("causes", cause.id, cause.evidence, allow_p=True)
        for mode in cause.modes:
            check_links("causes", cause.id, mode.evidence, allow_p=True, mode=mode.id)
        owned = [(cause.id, cause.via)] + [(f"{cause.id}/{m.id}", m.via) for m in cause.modes]
        for name, vias in owned:
            for via in vias:
                if via.mechanism not in kb.mechanisms:
                    problem(
                        "causes",
                        cause.id,
                        f"cause {name!r}: unknown mechanism id {via.mechanism!r}",
                    )
        for fix_id in cause.fixes:
            if fix_id not in kb.fixes:
                problem("causes", cause.id, f"cause {cause.id!r}: unknown fix id {fix_id!r}")
        if not cause.fixes:
            problem("causes", cause.id, f"cause {cause.id!r} has no fix")
        if not cause.evidence and not cause.via:
            problem("causes", cause.id, f"cause {cause.id!r} has no evidence links")
        if cause.id not in tested:
            problem(
                "causes",
                cause.id,
                f"cause {cause.id!r} has no rule test that expects it "
                "(expect_top or expect_in_top)",
            )

    for fix in kb.fixes.values():
        msg = verify_command_problem(fix.verify.command)
        if msg:
            problem("fixes", fix.id, f"fix {fix.id!r}: verify command: {msg}")

    for claim in kb.claims.values():
        for c in claim.causes:
            if kb.resolve_cause(c) is None:
                problem("claims", claim.id, f"claim {claim.id!r}: unknown cause id {c!r}")
        for f in claim.facts:
            if f not in kb.facts:
                problem("claims", claim.id, f"claim {claim.id!r}: unknown fact id {f!r}")

    for test, origin in zip(kb.tests, kb.test_origins):

        def bad(msg: str, origin=origin, test=test) -> None:
            kb.problems.append(Problem(origin, f"test {test.id!r}: {msg}"))

        for fid, raw in test.facts.items():
            test_fact = kb.facts.get(fid)
            if test_fact is None:
                bad(f"unknown fact id {fid!r}")
                continue
            if why := value_problem(test_fact, raw):
                bad(why)
        for fid, raw in test.expect_facts.items():
            expect_fact = kb.facts.get(fid)
            if expect_fact is None:
                bad(f"expect_facts: unknown fact id {fid!r}")
                continue
            if why := value_problem(expect_fact, raw):
                bad(f"expect_facts: {why}")
        named = [test.expect_top] if test.expect_top else []
        named += test.expect_in_top + test.expect_not_top
        named += [c for pair in test.expect_below for c in pair]
        for c in named:
            if kb.resolve_cause(c) is None and c != "other":
                bad(f"unknown cause id {c!r}")


def missing_translations(kb: KnowledgeBase, lang: str = "zh") -> list[str]:
    """One warning per entry whose user-facing text has no ``lang`` version (English is then
    shown instead): facts, mechanisms, causes, fixes and claims, each with its origin."""
    from ddpadvisor.i18n import as_lang, untranslated

    target = as_lang(lang)
    out = []
    for kind, entries in (
        ("facts", kb.facts),
        ("mechanisms", kb.mechanisms),
        ("causes", kb.causes),
        ("fixes", kb.fixes),
        ("claims", kb.claims),
    ):
        for id_, entry in entries.items():
            fields = untranslated(entry, target)
            if fields:
                out.append(
                    f"{kb.origin(kind, id_)}: warning: {kind[:-1]} {id_!r} has no {target} "
                    f"text for {', '.join(fields)}"
                )
    return out


def check_interview(kb: KnowledgeBase, fact: Fact, problem: Callable[[str], None]) -> None:
    """The interview fields of a fact: preconditions, links to other facts, labels, mentions."""
    me = f"fact {fact.id!r}"
    if fact.derived_from and fact.type != "bool":
        problem(f"{me}: derived_from needs a bool fact, not {fact.type}")
    if fact.derived_from and "asked" in fact.sources:
        problem(f"{me}: a fact derived_from others is never asked: drop 'asked' from sources")
    for field, cond in [
        *(("ask_if", c) for c in fact.ask_if),
        *(("skip_if", c) for c in fact.skip_if),
        *(("derived_from", c) for c in fact.derived_from),
    ]:
        other = kb.facts.get(cond.fact)
        if other is None:
            problem(f"{me}: {field} names unknown fact {cond.fact!r}")
        elif cond.fact == fact.id:
            problem(f"{me}: {field} cannot depend on the fact itself")
        elif (cond.ge is not None or cond.lt is not None) and other.type not in ("int", "float"):
            problem(f"{me}: {field} uses ge/lt on {cond.fact!r}, which is {other.type}")
        elif cond.is_ is not None or cond.in_ is not None:
            wanted = [cond.is_] if cond.is_ is not None else list(cond.in_ or [])
            for w in wanted:
                if why := value_problem(other, w):
                    problem(f"{me}: {field}: {why}")
    for other_id in fact.settled_by:
        if other_id not in kb.facts:
            problem(f"{me}: settled_by names unknown fact {other_id!r}")
    for imp in fact.implies:
        for other_id, raw in imp.then.items():
            target = kb.facts.get(other_id)
            if target is None:
                problem(f"{me}: implies names unknown fact {other_id!r}")
                continue
            if why := value_problem(target, raw):
                problem(f"{me}: implies: {why}")
    allowed = set(option_values(fact) or ["unknown"])
    for lang, labels in (("en", fact.labels or {}), ("zh", option_labels(fact, "zh"))):
        for key in labels:
            if key not in allowed:
                problem(
                    f"{me}: {lang} label for {key!r}, not an option ({', '.join(sorted(allowed))})"
                )
    for mention in fact.mentions:
        patterns = [*mention.en, *mention.zh]
        if not patterns:
            problem(f"{me}: a mention needs at least one en or zh pattern")
        carries = all("(?P<value>" in p for p in patterns)
        if mention.value is None and not carries:
            problem(f"{me}: a mention without 'value' needs a (?P<value>...) group in each pattern")
        if mention.value is not None and (why := value_problem(fact, mention.value)):
            problem(f"{me}: mention: {why}")


def verify_command_problem(command: str) -> str | None:
    """None if the command names a real ddpadvisor subcommand/probe or is valid shell."""
    try:
        words = shlex.split(command, comments=True)
    except ValueError as exc:
        return f"not valid shell: {exc}"
    if not words:
        return "empty"
    for segment in re.split(r"\s*(?:&&|\|\||;|\|)\s*", command):
        try:
            seg = shlex.split(segment)
        except ValueError:
            continue
        if not seg or seg[0] != "ddpadvisor":
            if len(seg) >= 3 and seg[0].startswith("python") and seg[1] == "-c":
                try:
                    compile(seg[2], "<verify>", "exec")
                except SyntaxError as exc:
                    return f"python -c code does not compile: {exc.msg}"
            continue
        rest = [w for w in seg[1:] if not w.startswith("-")]
        if rest and rest[0] in SUBCOMMANDS:
            if rest[0] == "probe":
                for name in _positionals(seg[seg.index("probe") + 1 :]):
                    if name not in probe_catalog() and "/" not in name:
                        return f"unknown probe {name!r} (probes: {', '.join(probe_catalog())})"
        elif rest and not any(w.startswith("--") for w in seg[1:]):
            return f"unknown ddpadvisor subcommand {rest[0]!r}"
    return None


def _positionals(words: list[str]) -> list[str]:
    """Words that are neither options nor option values (``--nproc 2`` takes its value)."""
    out, skip = [], False
    for w in words:
        if skip:
            skip = False
        elif w == "--":
            break
        elif w.startswith("-"):
            skip = "=" not in w
        else:
            out.append(w)
    return out


def seed_paragraphs(seeds_dir: Path) -> dict[str, int]:
    """Thread prefix ('000') -> number of its last paragraph (title is 0)."""
    out = {}
    for path in sorted(seeds_dir.glob("*.txt")):
        prefix = path.name[:3]
        text = read_text(path)  # a regular file of bounded size: never a FIFO or a device
        lines = [ln for ln in text.splitlines() if ln.strip()]
        out[prefix] = len(lines) - 1
    return out


def check_seed_coverage(kb: KnowledgeBase, seeds_dir: Path) -> list[str]:
    """Paragraphs (``000:N``, N >= 1; 0 is the title) of the seed threads no claim cites."""
    cited = {p for claim in kb.claims.values() for p in claim.provenance}
    missing = []
    for prefix, last in seed_paragraphs(seeds_dir).items():
        for n in range(1, last + 1):
            if f"{prefix}:{n}" not in cited:
                missing.append(f"{prefix}:{n}")
    return missing

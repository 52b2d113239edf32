"""Annotated fixture scripts: every ``# expect:`` line is reported, no ``# ok:`` line is; every
fixture lives in a rule's folder and every rule has a fixture there that exercises it."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddpadvisor.scan import ScanResult, scan_file
from ddpadvisor.scan.rules import RULES, Rule
from tests.scan_support import (
    CAUSE_FACTS,
    Fixture,
    fixture_paths,
    fixtures,
    matches,
    parse_fixture,
    typed,
)
from tests.scan_support import (
    FIXTURES as FIXTURE_ROOT,
)

FIXTURES = fixtures()
_CACHE: dict[str, ScanResult] = {}


def scan(fx: Fixture) -> ScanResult:
    if fx.name not in _CACHE:
        _CACHE[fx.name] = scan_file(fx.path, strict=True)
    return _CACHE[fx.name]


def _hits(result: ScanResult, label: str, line: int, cause: str) -> list[str]:
    where = f"{label}:{line}"
    out = []
    for fact, check in CAUSE_FACTS[cause]:
        for f in result.findings:
            if f.fact == fact and f.where == where and matches(check, f.value):
                out.append(f"{f.fact}={f.value}")
    return out


def _dump(result: ScanResult) -> str:
    return "\n".join(f"  {f.where:>24} {f.fact}={f.value}  ({f.detail})" for f in result.findings)


def test_there_are_fixtures() -> None:
    assert len(FIXTURES) >= 20
    assert sum(len(fx.expect) for fx in FIXTURES) >= 30
    assert sum(len(fx.ok) for fx in FIXTURES) >= 10


def test_annotations_name_known_causes() -> None:
    for fx in FIXTURES:
        for line, cause in fx.expect + fx.ok:
            assert cause in CAUSE_FACTS, f"{fx.name}:{line}: unknown cause {cause!r}"


@pytest.mark.parametrize("fx", FIXTURES, ids=lambda fx: fx.name)
def test_expect_lines_are_reported(fx: Fixture) -> None:
    result = scan(fx)
    for line, cause in fx.expect:
        assert _hits(result, fx.name, line, cause), (
            f"{fx.name}:{line}: expected a finding for {cause}; the scan reported:\n{_dump(result)}"
        )


@pytest.mark.parametrize("fx", [fx for fx in FIXTURES if fx.ok], ids=lambda fx: fx.name)
def test_ok_lines_are_not_reported(fx: Fixture) -> None:
    result = scan(fx)
    for line, cause in fx.ok:
        hits = _hits(result, fx.name, line, cause)
        assert not hits, f"{fx.name}:{line}: lookalike reported as {cause}: {hits}"


@pytest.mark.parametrize("fx", [fx for fx in FIXTURES if fx.facts], ids=lambda fx: fx.name)
def test_declared_fact_values(fx: Fixture) -> None:
    result = scan(fx)
    for fact, want in fx.facts.items():
        got = result.value(fact)
        if want == "unknown":
            assert got is None, (
                f"{fx.name}: {fact} should stay unknown, scan says {got}\n{_dump(result)}"
            )
        else:
            assert got == typed(want), f"{fx.name}: {fact}: want {want}, got {got}\n{_dump(result)}"


# Rules that have no fixture with an ``# expect:``/``# ok:`` line for them in their own folder,
# each with the fixture elsewhere that holds such a line (checked below: it must still hold one).
# A fixture lives under the first rule its ``# expect:`` lines name, so these rules' lines sit
# in scripts that exercise another rule first.
ANNOTATED_ELSEWHERE = {
    # batchnorm_resnet.py's DDP line expects broadcast-buffers-disabled beside the BN cause
    "broadcast_buffers": "replicas/batchnorm/batchnorm_resnet.py",
    # the augmentation cause's signature fact is seeding's rank_seeds_identical, so its lines
    # count for seeding first
    "augmentation": "data/seeding/seed_offset_by_rank.py",
}
# Rules that set no fact at all: nothing for a fixture to annotate.
NO_FACTS = {"framework_note"}  # only warns which framework drives the step


def _rule_folder(rule: Rule) -> Path:
    return FIXTURE_ROOT / rule.area / rule.name


def _annotated_for(fx: Fixture, rule: Rule) -> bool:
    return any(
        fact in rule.facts for _, cause in fx.expect + fx.ok for fact, _ in CAUSE_FACTS[cause]
    )


def test_fixtures_live_in_a_rule_folder() -> None:
    rule_folders = {_rule_folder(r) for r in RULES}
    on_disk: list[Path] = []
    for path in FIXTURE_ROOT.rglob("*.py"):
        rel = path.relative_to(FIXTURE_ROOT)
        if rel.parts[0] == "imports" or (len(rel.parts) == 1 and path.name.startswith("_")):
            continue  # the import layouts; helper modules the rule folders link to
        assert path.parent in rule_folders, f"{rel}: not in a tests/scan_fixtures/<area>/<rule>/"
        if not path.name.startswith("_"):
            on_disk.append(path)
    # the fixture tests read every script there is
    assert sorted(on_disk) == fixture_paths()


def test_every_rule_has_a_fixture_beside_it() -> None:
    pointed = {fact for checks in CAUSE_FACTS.values() for fact, _ in checks}
    missing: list[str] = []
    for r in RULES:
        if r.name in NO_FACTS:
            assert not r.facts, f"{r.name} sets facts now: give it a fixture"
            continue
        mine = [fx for fx in FIXTURES if fx.path.parent == _rule_folder(r)]
        if not r.facts & pointed:
            # no cause's signature is one of its facts, so no line can name it: a fixture in
            # its folder must state one of its facts in a ``# scan-facts:`` header instead
            ok = any(r.facts & set(fx.facts) for fx in mine)
        elif r.name in ANNOTATED_ELSEWHERE:
            assert not any(_annotated_for(fx, r) for fx in mine), (
                f"{r.name} has an annotated fixture of its own now: drop it from the allow-list"
            )
            elsewhere = parse_fixture(FIXTURE_ROOT / ANNOTATED_ELSEWHERE[r.name])
            ok = _annotated_for(elsewhere, r)
        else:
            ok = any(_annotated_for(fx, r) for fx in mine)
        if not ok:
            missing.append(f"{r.area}/{r.name}")
    assert missing == []

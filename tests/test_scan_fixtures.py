"""Annotated fixture scripts: every ``# expect:`` line is reported, no ``# ok:`` line is."""

from __future__ import annotations

import pytest

from ddpadvisor.scan import ScanResult, scan_file
from tests.scan_support import CAUSE_FACTS, Fixture, fixtures, matches, typed

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

"""Every fact the scanner can set has fixtures where it comes out true, false and undecided.

The values come from the ``# scan-facts:`` headers, which test_scan_fixtures checks against
the real scan, so a header can only claim what the scanner really reports.
"""

from __future__ import annotations

from collections import defaultdict

import pytest

from ddpadvisor.kb.load import default_dirs, load_kb
from tests.scan_support import fixtures

KB = load_kb(default_dirs())
# facts derived from others (``derived_from``) are the engine's, not a scanner rule's
SCANNER_FACTS = sorted(
    f.id for f in KB.facts.values() if "script" in f.sources and not f.derived_from
)


def _declared() -> dict[str, set[str]]:
    seen: dict[str, set[str]] = defaultdict(set)
    for fx in fixtures():
        for fact, value in fx.facts.items():
            seen[fact].add(value.lower())
    return seen


DECLARED = _declared()


def test_headers_name_real_facts() -> None:
    unknown = sorted(set(DECLARED) - set(KB.facts))
    assert not unknown, f"fixture headers name facts the KB does not define: {unknown}"


@pytest.mark.parametrize("fact", SCANNER_FACTS)
def test_fact_has_true_false_and_undecided_fixtures(fact: str) -> None:
    values = DECLARED.get(fact, set())
    assert "unknown" in values, f"{fact}: no fixture where the scan leaves it undecided"
    decided = values - {"unknown"}
    if KB.facts[fact].type == "bool":
        missing = {"true", "false"} - decided
        assert not missing, f"{fact}: no fixture where it comes out {sorted(missing)}"
    else:
        assert len(decided) >= 2, f"{fact}: fixtures decide only {sorted(decided)}; need two values"

"""The forum claims (kb/claims/): coverage of both seed threads, backing, and lookup."""

from __future__ import annotations

import ast
import re
from collections import Counter
from functools import cache
from pathlib import Path

import pytest

from ddpadvisor.kb.check import check_seed_coverage, seed_paragraphs
from ddpadvisor.kb.claims import lookup
from ddpadvisor.kb.load import load_kb
from ddpadvisor.kb.model import KnowledgeBase
from ddpadvisor.kb.schema import Claim
from tests.conftest import REPO, SEEDS

CLAIMS_DIR = REPO / "kb" / "claims"
URL = re.compile(r"^https?://\S+$")
THREADS = ("000", "001")


@pytest.fixture(scope="module")
def kb() -> KnowledgeBase:
    loaded = load_kb([REPO / "kb"])
    claim_problems = [str(p) for p in loaded.problems if "claim" in p.message]
    assert not claim_problems, claim_problems
    return loaded


@pytest.fixture(scope="module")
def claims(kb: KnowledgeBase) -> list[Claim]:
    """Claims defined in kb/claims/ (not ones a future KB file elsewhere might add)."""
    return [
        claim
        for claim in kb.claims.values()
        if Path(kb.origin("claims", claim.id).file).parent == CLAIMS_DIR
    ]


def seeds_or_skip() -> Path:
    if not SEEDS.is_dir():
        pytest.skip(f"the seed threads are not available at {SEEDS}")
    return SEEDS


@cache
def _test_names_in(path: Path) -> frozenset[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return frozenset(
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")
    )


def test_enough_distinct_claims(claims: list[Claim]) -> None:
    assert len(claims) >= 80
    texts = Counter(c.text.strip().lower() for c in claims)
    assert not [t for t, n in texts.items() if n > 1], "two claims state the same advice"


def test_every_verdict_is_used(claims: list[Claim]) -> None:
    assert {c.verdict for c in claims} == {"correct", "partly-correct", "myth", "harmful"}


def test_every_claim_is_backed(claims: list[Claim]) -> None:
    """A verdict, a reason of real length, and a URL or an experiment behind it."""
    for claim in claims:
        assert len(claim.reason.split()) >= 12, claim.id
        urls = [r.url for r in claim.references]
        assert all(URL.match(u) for u in urls), claim.id
        assert urls or claim.experiment, claim.id
        assert claim.keywords, f"{claim.id}: no keywords for `ddpadvisor claims` to match"


def test_experiments_point_to_existing_tests(claims: list[Claim]) -> None:
    for claim in claims:
        if claim.experiment is None:
            continue
        path, sep, name = claim.experiment.partition("::")
        assert sep, f"{claim.id}: experiment must be path::test_name"
        assert path.startswith("tests/experiments/"), claim.id
        file = REPO / path
        assert file.is_file(), f"{claim.id}: {path} does not exist"
        assert name in _test_names_in(file), f"{claim.id}: no test {name!r} in {path}"


def test_enough_verdicts_rest_on_experiments(claims: list[Claim]) -> None:
    with_experiment = [c for c in claims if c.experiment]
    assert len(with_experiment) >= 8
    assert len({c.experiment for c in with_experiment}) >= 8
    # The verdicts that most need a demonstration rather than an argument.
    refuted = [c for c in with_experiment if c.verdict in ("myth", "harmful")]
    assert len(refuted) >= 8


def test_provenance_ids_are_well_formed(claims: list[Claim]) -> None:
    for claim in claims:
        assert len(set(claim.provenance)) == len(claim.provenance), f"{claim.id}: repeated"
        for item in claim.provenance:
            thread, _, paragraph = item.partition(":")
            assert thread in THREADS, f"{claim.id}: unknown thread in {item!r}"
            # Paragraph 0 is the thread title, which is not advice.
            assert int(paragraph) >= 1, f"{claim.id}: {item!r} cites the title"
            assert item == f"{thread}:{int(paragraph)}", f"{claim.id}: {item!r} is not canonical"


def test_provenance_stays_inside_the_threads(claims: list[Claim]) -> None:
    last = seed_paragraphs(seeds_or_skip())
    assert set(last) == set(THREADS)
    for claim in claims:
        for item in claim.provenance:
            thread, _, paragraph = item.partition(":")
            assert int(paragraph) <= last[thread], f"{claim.id}: {item} is past the thread's end"


def test_both_threads_are_fully_cited(kb: KnowledgeBase) -> None:
    assert check_seed_coverage(kb, seeds_or_skip()) == []


def test_repeated_advice_is_merged(claims: list[Claim]) -> None:
    """Advice given in several answers lives in one claim with several provenances."""
    multi = [c for c in claims if len(c.provenance) > 1]
    assert len(multi) >= 20
    assert any({p[:3] for p in c.provenance} == set(THREADS) for c in claims)


def test_claim_files_hold_only_claims() -> None:
    import yaml

    for path in sorted(CLAIMS_DIR.glob("*.yaml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        assert set(data) == {"claims"}, path.name


@pytest.mark.parametrize(
    ("advice", "verdict", "cites"),
    [
        ("give every rank a different seed", "harmful", "000:27"),
        ("scale the clip threshold by the number of GPUs", "harmful", "000:8"),
        ("bucket_cap_mb gradient_as_bucket_view", "myth", "000:14"),
        ("GradScaler loss scale not synced across ranks", "myth", "000:4"),
        ("call set_epoch on the sampler", "correct", "000:21"),
    ],
)
def test_pasted_advice_finds_its_claim(
    kb: KnowledgeBase, advice: str, verdict: str, cites: str
) -> None:
    top = lookup(kb, advice, limit=1)
    assert top, advice
    claim = top[0][1]
    assert claim.verdict == verdict, claim.id
    assert cites in claim.provenance, claim.id

"""`ddpadvisor claims "TEXT"`: Chinese and English tips find their claim, the rest finds none.

The queries live in tests/claims_queries.py (our own paraphrases). The seed threads are read
from shared/seeds at test time only; the tests skip where that folder is absent.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from difflib import SequenceMatcher

import pytest

from ddpadvisor.i18n import detect as pick_lang
from ddpadvisor.kb.claims import THRESHOLD, has_cjk, index_for, lookup, terms
from ddpadvisor.kb.load import load_kb
from ddpadvisor.kb.model import KnowledgeBase
from tests.claims_queries import ENGLISH, GENERIC, HELD_OUT, NONSENSE, TUNED, UNRELATED
from tests.conftest import PYTHON, REPO, SEEDS

# A worktree sits one level deeper than the checkout that holds shared/ beside it.
SEED_DIRS = (SEEDS, REPO.parent.parent / "shared" / "seeds")
# API names and identifiers the Chinese text must keep as they are.
IDENTIFIER = re.compile(
    r"[A-Za-z_][A-Za-z0-9_]+(?:\.[A-Za-z_][A-Za-z0-9_]+)+|[A-Za-z0-9]*_[A-Za-z0-9_]+"
)
# The longest run of Chinese characters a KB text or a test query may share with a seed
# paragraph: enough for a term (梯度累积, 混合精度), too short for a copied clause.
MAX_SHARED_CJK = 9


@pytest.fixture(scope="module")
def kb() -> KnowledgeBase:
    return load_kb([REPO / "kb"])


def seed_paragraphs() -> dict[str, str]:
    """'000:N' -> paragraph N of thread 000 (0, the title, left out)."""
    seeds = next((d for d in SEED_DIRS if d.is_dir()), None)
    if seeds is None:
        pytest.skip(f"the seed threads are not available at {SEEDS}")
    out = {}
    for path in sorted(seeds.glob("*.txt")):
        lines = [ln for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]
        out.update({f"{path.name[:3]}:{n}": line for n, line in enumerate(lines) if n})
    return out


def _cjk(text: str) -> str:
    return "".join(re.findall(r"[\u4e00-\u9fff]", text))


def _longest_shared_cjk(text: str, paragraphs: list[str]) -> str:
    a = _cjk(text)
    best = ""
    for p in paragraphs:
        m = SequenceMatcher(None, a, p, autojunk=False).find_longest_match(0, len(a), 0, len(p))
        if m.size > len(best):
            best = a[m.a : m.a + m.size]
    return best


# -- the Chinese texts -------------------------------------------------------------------


def test_every_claim_has_chinese_text_and_reason(kb: KnowledgeBase) -> None:
    for claim in kb.claims.values():
        zh = claim.zh or {}
        for field in ("text", "reason"):
            value = zh.get(field)
            assert isinstance(value, str) and has_cjk(value), f"{claim.id}: no Chinese {field}"
        assert any(has_cjk(k) for k in claim.keywords), f"{claim.id}: no Chinese keyword"


def test_chinese_text_keeps_api_names(kb: KnowledgeBase) -> None:
    """set_epoch, no_sync, torch.compile, reduction='sum' ... stay as written in English."""
    for claim in kb.claims.values():
        zh = str((claim.zh or {})["text"])
        for name in IDENTIFIER.findall(claim.text):
            assert name in zh, f"{claim.id}: {name!r} is missing from the Chinese text"


def test_nothing_is_copied_from_the_threads(kb: KnowledgeBase) -> None:
    """Chinese KB texts, keywords and our test queries paraphrase; they never copy a clause."""
    paragraphs = [_cjk(p) for p in seed_paragraphs().values()]
    texts = [
        (f"{c.id}: zh {f}", str((c.zh or {})[f]))
        for c in kb.claims.values()
        for f in ("text", "reason")
    ]
    texts += [(f"{c.id}: keyword", k) for c in kb.claims.values() for k in c.keywords]
    texts += [("query", q) for q, _ in TUNED + HELD_OUT + UNRELATED]
    for where, text in texts:
        shared = _longest_shared_cjk(text, paragraphs)
        assert len(shared) <= MAX_SHARED_CJK, f"{where}: {shared!r} is copied from a thread"


# -- pasted tips find their claim ---------------------------------------------------------


def test_the_tuned_tips_span_both_threads_and_every_verdict(kb: KnowledgeBase) -> None:
    claims = [kb.claims[cid] for _, cid in TUNED]
    assert len(claims) >= 10
    assert {p[:3] for c in claims for p in c.provenance} == {"000", "001"}
    assert {c.verdict for c in claims} == {"correct", "partly-correct", "myth", "harmful"}
    assert all(has_cjk(q) for q, _ in TUNED)


@pytest.mark.parametrize(("tip", "claim_id"), TUNED)
def test_a_chinese_tip_finds_its_claim_first(kb: KnowledgeBase, tip: str, claim_id: str) -> None:
    found = lookup(kb, tip, limit=3)
    assert found, f"no close match for {tip!r}"
    assert found[0][1].id == claim_id, [(round(s, 2), c.id) for s, c in found]
    assert found[0][0] >= THRESHOLD


@pytest.mark.parametrize(("tip", "claim_id"), ENGLISH)
def test_an_english_tip_finds_its_claim_first(kb: KnowledgeBase, tip: str, claim_id: str) -> None:
    found = lookup(kb, tip, limit=1)
    assert found and found[0][1].id == claim_id, [(round(s, 2), c.id) for s, c in found]


def test_every_cited_paragraph_finds_a_claim_citing_it_in_the_top_3(kb: KnowledgeBase) -> None:
    cited = {p for c in kb.claims.values() for p in c.provenance}
    missed = []
    for pid, text in seed_paragraphs().items():
        if pid not in cited:
            continue
        top = lookup(kb, text, limit=3)
        if not any(pid in c.provenance for _, c in top):
            missed.append((pid, [c.id for _, c in top]))
    assert not missed


def test_a_claim_keyword_phrase_pasted_whole_wins(kb: KnowledgeBase) -> None:
    """'different seed every rank' is that claim's own phrase, not the sampler-seed one."""
    top = lookup(kb, "give every rank a different seed", limit=2)
    assert top and top[0][1].id == "different-seed-per-rank"


# -- and nothing else does ----------------------------------------------------------------


@pytest.mark.parametrize("query", NONSENSE + GENERIC)
def test_nonsense_finds_no_close_match(kb: KnowledgeBase, query: str) -> None:
    assert lookup(kb, query) == []


@pytest.mark.parametrize(("query", "claim_id"), UNRELATED)
def test_an_unrelated_correct_claim_is_not_the_answer(
    kb: KnowledgeBase, query: str, claim_id: str
) -> None:
    """The query shares words with a CORRECT claim, which must still not be offered."""
    claim = kb.claims[claim_id]
    assert claim.verdict == "correct"
    index = index_for(kb)
    own = index.views[index.claims.index(claim)][-1].terms
    assert terms(query) & own, "the query must share a term with the claim to test anything"
    scores = {m.claim.id: m.score for m in index.search(query)}
    assert 0 < scores[claim_id] < THRESHOLD
    assert lookup(kb, query) == []


def test_the_threshold_sits_between_the_tips_and_the_unrelated(kb: KnowledgeBase) -> None:
    index = index_for(kb)
    own = [next(m.score for m in index.search(q) if m.claim.id == cid) for q, cid in TUNED]
    stray = [m.score for q, _ in UNRELATED for m in index.search(q)[:1]]
    assert max(stray) < THRESHOLD <= min(own)


# -- the command --------------------------------------------------------------------------


def _claims(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PYTHON, "-m", "ddpadvisor", "claims", *args],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "LANG": "C.UTF-8", "LC_ALL": "", "LC_MESSAGES": "", **(env or {})},
        cwd=REPO,
    )


def test_cli_says_no_close_match() -> None:
    run = _claims("如何烤面包")
    assert run.returncode == 0, run.stderr
    assert run.stdout.lower().startswith("no close match")
    assert "[" not in run.stdout  # no verdict row


def test_cli_json_flags_no_close_match() -> None:
    run = _claims("--json", "what is the capital of France")
    doc = json.loads(run.stdout)
    assert doc["close_match"] is False and doc["claims"] == []
    assert doc["threshold"] == THRESHOLD


def test_cli_shows_the_score_and_chinese_under_lang_zh() -> None:
    tip, claim_id = TUNED[0]
    run = _claims("--lang", "zh", tip)
    first = run.stdout.splitlines()[0]
    score = re.match(r"匹配 (\d\.\d\d) ", first)
    assert score and float(score.group(1)) >= THRESHOLD, first
    assert "有害 harmful" in first and has_cjk(first.split("]", 1)[1])
    doc = json.loads(_claims("--json", tip).stdout)
    assert doc["close_match"] is True
    assert doc["claims"][0]["id"] == claim_id and doc["claims"][0]["match"] >= THRESHOLD


def test_cli_lists_and_filters_without_text(kb: KnowledgeBase) -> None:
    listing = json.loads(_claims("--json").stdout)["claims"]
    assert len(listing) == len(kb.claims) and "match" not in listing[0]
    harmful = json.loads(_claims("--json", "--verdict", "harmful").stdout)["claims"]
    assert harmful and {c["verdict"] for c in harmful} == {"harmful"}
    assert len(harmful) < len(listing)
    text = _claims("--verdict", "myth").stdout
    assert text.startswith("[MYTH]")


def test_language_comes_from_flag_then_environment() -> None:
    assert pick_lang("zh", {"LANG": "en_US.UTF-8"}) == "zh"
    assert pick_lang(None, {"LANG": "zh_CN.UTF-8"}) == "zh"
    assert pick_lang(None, {"LC_ALL": "en_GB.UTF-8", "LANG": "zh_CN.UTF-8"}) == "en"
    assert pick_lang(None, {}) == "en"


def test_query_sets_are_disjoint_and_known(kb: KnowledgeBase) -> None:
    tuned = {q for q, _ in TUNED}
    assert not tuned & {q for q, _ in HELD_OUT}
    for _, cid in TUNED + HELD_OUT + UNRELATED:
        assert cid in kb.claims, cid

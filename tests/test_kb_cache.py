"""The KB cache is invalidated by any edit to a rule file and never hides a problem."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ddpadvisor.bundled import bundled_dir
from ddpadvisor.engine.cache import load_cached

RULE = """\
causes:
  - id: cached-cause
    title: Cached
    area: data
    prior: {prior}
    mechanism: Something.
    evidence:
      - {{fact: uses_lora, is: true, strength: strong}}
    fixes: [cached-fix]
fixes:
  - id: cached-fix
    title: Fix
    steps: [Do it.]
    verify: {{command: ddpadvisor kb test, expect: passes}}
tests:
  - id: cached-test
    facts: {{uses_lora: true}}
    expect_in_top: [cached-cause]
    k: 50
"""


@pytest.fixture
def cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("DDPADVISOR_NO_CACHE", raising=False)
    return tmp_path / "cache"


def test_cache_written_then_reused_then_invalidated(tmp_path: Path, cache_home: Path) -> None:
    rules = tmp_path / "rules"
    rules.mkdir()
    rule = rules / "r.yaml"
    rule.write_text(RULE.format(prior="rare"))
    dirs = [bundled_dir("kb"), rules]
    kb, model = load_cached(dirs)
    assert model is not None and kb.causes["cached-cause"].prior == "rare"
    assert len(list(cache_home.rglob("kb-*.pickle"))) == 1
    kb2, _ = load_cached(dirs)
    assert kb2.causes["cached-cause"].prior == "rare"
    rule.write_text(RULE.format(prior="common"))
    st = rule.stat()
    os.utime(rule, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    kb3, _ = load_cached(dirs)
    assert kb3.causes["cached-cause"].prior == "common"


def test_broken_kb_is_not_cached(tmp_path: Path, cache_home: Path) -> None:
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "r.yaml").write_text(RULE.format(prior="7"))
    kb, model = load_cached([bundled_dir("kb"), rules])
    assert kb.problems and model is None
    assert not list(cache_home.rglob("kb-*.pickle"))

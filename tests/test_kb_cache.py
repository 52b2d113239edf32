"""The KB cache is invalidated by any edit to a rule file, never hides a problem, is plain
JSON that round-trips the KB and its model, and is never trusted when others could write it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ddpadvisor.bundled import bundled_dir
from ddpadvisor.engine.cache import load_cached
from ddpadvisor.engine.diagnose import Engine
from ddpadvisor.observation import observe

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
    assert len(list(cache_home.rglob("kb-*.json"))) == 1
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
    assert not list(cache_home.rglob("kb-*.json"))


def test_warm_start_diagnoses_like_a_cold_one(tmp_path: Path, cache_home: Path) -> None:
    dirs = [bundled_dir("kb")]
    cold_kb, cold_model = load_cached(dirs)
    warm_kb, warm_model = load_cached(dirs)
    assert list(cache_home.rglob("kb-*.json")), "the first load writes the cache"
    assert type(warm_kb.causes).__name__ == "LazyEntries", "the second load reads it"
    facts = {
        "uses_distributed_sampler": False,
        "single_gpu_converges": True,
        "precision": "fp16_amp",
    }
    obs = [o for f, v in facts.items() if (o := observe(cold_kb, f, v, "set")) is not None]
    cold = Engine(cold_kb, cold_model).diagnose(obs)
    warm = Engine(warm_kb, warm_model).diagnose(obs)
    assert cold.model_dump() == warm.model_dump()
    assert len(warm_kb.tests) == len(cold_kb.tests) and warm_kb.tests[0] == cold_kb.tests[0]


def test_cache_is_plain_json_without_code(tmp_path: Path, cache_home: Path) -> None:
    load_cached([bundled_dir("kb")])
    (path,) = cache_home.rglob("kb-*.json")
    assert path.read_bytes()[:1] == b"{"
    assert (path.stat().st_mode & 0o077) == 0, "only the owner may read or write it"


@pytest.mark.parametrize("who", ["file", "folder"])
def test_cache_writable_by_others_is_ignored(tmp_path: Path, cache_home: Path, who: str) -> None:
    dirs = [bundled_dir("kb")]
    load_cached(dirs)
    (path,) = cache_home.rglob("kb-*.json")
    # A planted cache claiming another prior must not be believed once others can write it.
    text = path.read_text().replace('\\"prior\\":\\"common\\"', '\\"prior\\":\\"rare\\"')
    path.write_text(text)
    target = path if who == "file" else path.parent
    target.chmod(target.stat().st_mode | 0o022)
    kb, _ = load_cached(dirs)
    assert type(kb.causes).__name__ == "dict", "rebuilt from the YAML, not read from the cache"

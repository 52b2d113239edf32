"""The KB cache is invalidated by any edit to a rule file, never hides a problem, is plain
JSON that round-trips the KB and its model, and is never trusted when others could write it."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from ddpadvisor.bundled import bundled_dir
from ddpadvisor.engine import cache
from ddpadvisor.engine.cache import load_cached
from ddpadvisor.engine.diagnose import Engine
from ddpadvisor.observation import observe
from ddpadvisor.report.present import diagnose

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
    cold = diagnose(Engine(cold_kb, cold_model), obs)
    warm = diagnose(Engine(warm_kb, warm_model), obs)
    assert cold.model_dump() == warm.model_dump()
    assert len(warm_kb.tests) == len(cold_kb.tests) and warm_kb.tests[0] == cold_kb.tests[0]


def test_cache_is_plain_json_without_code(tmp_path: Path, cache_home: Path) -> None:
    load_cached([bundled_dir("kb")])
    (path,) = cache_home.rglob("kb-*.json")
    lines = path.read_bytes().splitlines()
    assert lines[0][:1] == b"{" and len(lines) > 100
    for line in lines:
        json.loads(line)  # a header, then one JSON text per entry: data, never code
    assert (path.stat().st_mode & 0o077) == 0, "only the owner may read or write it"


def _plant_rare(path: Path) -> None:
    """Rewrite a cached cause's prior in place (same length, so every offset still holds), and
    the body's checksum with it: a deliberate plant, not damage."""
    data = path.read_bytes()
    assert b'"prior":"common"' in data
    end = data.index(b"\n")
    body = data[end + 1 :].replace(b'"prior":"common"', b'"prior":"rare"  ')
    head = json.loads(data[:end])
    head["body"] = hashlib.sha256(body).hexdigest()
    path.write_bytes(json.dumps(head, separators=(",", ":")).encode() + b"\n" + body)


@pytest.mark.parametrize("who", ["file", "folder"])
def test_cache_writable_by_others_is_ignored(tmp_path: Path, cache_home: Path, who: str) -> None:
    dirs = [bundled_dir("kb")]
    load_cached(dirs)
    (path,) = cache_home.rglob("kb-*.json")
    _plant_rare(path)
    planted, _ = load_cached(dirs)
    assert "common" not in {c.prior for c in planted.causes.values()}, "the plant is read"
    # A planted cache claiming another prior must not be believed once others can write it.
    target = path if who == "file" else path.parent
    target.chmod(target.stat().st_mode | 0o022)
    kb, _ = load_cached(dirs)
    assert type(kb.causes).__name__ == "dict", "rebuilt from the YAML, not read from the cache"
    assert "common" in {c.prior for c in kb.causes.values()}


def _rules(tmp_path: Path, prior: str = "rare") -> Path:
    rules = tmp_path / "rules"
    rules.mkdir(exist_ok=True)
    (rules / "r.yaml").write_text(RULE.format(prior=prior))
    return rules


def test_same_size_edit_with_old_mtime_invalidates(
    tmp_path: Path, cache_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An edit that keeps the size and puts the mtime back still changes the ctime (with the
    racy window closed, so the stamp alone must catch it)."""
    monkeypatch.setattr(cache, "RACY_S", -60.0)
    rules = _rules(tmp_path, "rare")
    rule = rules / "r.yaml"
    st = rule.stat()
    dirs = [bundled_dir("kb"), rules]
    load_cached(dirs)
    rule.write_text(RULE.format(prior="7.0x"))  # as long as "rare", and not a valid prior
    os.utime(rule, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert rule.stat().st_size == st.st_size and rule.stat().st_mtime_ns == st.st_mtime_ns
    kb, model = load_cached(dirs)
    assert kb.problems and model is None, "the edited file was loaded again"


def test_racy_file_is_checked_by_content(
    tmp_path: Path, cache_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a filesystem whose stamps miss an edit, a file changed just before the cache was
    built is compared by content, so the edit is still seen."""
    monkeypatch.setattr(cache, "_stamp", lambda st: [st.st_size])
    monkeypatch.setattr(cache, "RACY_S", 3600.0)  # a slow machine stays inside the window
    rules = _rules(tmp_path, "rare")
    dirs = [bundled_dir("kb"), rules]
    load_cached(dirs)
    warm, _ = load_cached(dirs)
    assert type(warm.causes).__name__ == "LazyEntries", "an unchanged racy file is a hit"
    (rules / "r.yaml").write_text(RULE.format(prior="7.0x"))
    kb, model = load_cached(dirs)
    assert kb.problems and model is None, "the edited file was loaded again"


def test_warm_start_reads_no_rule_file(
    tmp_path: Path, cache_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Files changed long before the cache was built are trusted by their stamp: a warm start
    neither parses nor hashes them (the racy window is closed here to stand for "long ago")."""
    monkeypatch.setattr(cache, "RACY_S", -60.0)
    dirs = [bundled_dir("kb"), _rules(tmp_path)]
    load_cached(dirs)

    def refuse(path: Path) -> str:
        raise AssertionError(f"read {path}")

    monkeypatch.setattr(cache, "_digest", refuse)
    monkeypatch.setattr("ddpadvisor.kb.load.load_kb", refuse)
    kb, model = load_cached(dirs)
    assert model is not None and kb.causes["cached-cause"].prior == "rare"


def test_new_file_invalidates_and_old_caches_go(tmp_path: Path, cache_home: Path) -> None:
    rules = _rules(tmp_path)
    dirs = [bundled_dir("kb"), rules]
    load_cached(dirs)
    (rules / "more.yml").write_text(RULE.replace("cached-", "more-").format(prior="common"))
    kb, model = load_cached(dirs)
    assert model is not None and "more-cause" in kb.causes
    assert len(list(cache_home.rglob("kb-*.json"))) == 1, "the stale cache was removed"
    warm, _ = load_cached(dirs)
    assert type(warm.causes).__name__ == "LazyEntries" and "more-cause" in warm.causes


def test_rule_folder_round_trips_tests_and_origins(tmp_path: Path, cache_home: Path) -> None:
    dirs = [bundled_dir("kb"), _rules(tmp_path)]
    cold, cold_model = load_cached(dirs)
    warm, warm_model = load_cached(dirs)
    assert cold_model is not None and warm_model is not None
    for name in ("causes", "priors", "gates", "measured", "gate_groups"):
        assert getattr(warm_model, name) == getattr(cold_model, name), name
    assert warm_model.facts.keys() == cold_model.facts.keys()
    for fid, table in cold_model.facts.items():
        got = warm_model.facts[fid]
        assert (got.classes, got.healthy, got.likelihood) == (
            table.classes,
            table.healthy,
            table.likelihood,
        )
        assert {ci: got.paths[ci] for ci in got.likelihood} == table.paths, fid
        assert warm_model.row_groups(fid) == cold_model.row_groups(fid), fid
    assert type(warm.causes).__name__ == "LazyEntries"
    assert dict(warm.origins) == cold.origins
    assert list(warm.test_origins) == cold.test_origins
    assert list(warm.tests) == cold.tests
    for kind in ("facts", "mechanisms", "causes", "fixes", "claims"):
        entries = getattr(warm, kind)
        assert {k: entries[k] for k in entries} == getattr(cold, kind), kind


def test_racy_check_is_dropped_once_files_are_old(
    tmp_path: Path, cache_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cache built right after an edit hashes that file on each start only until the file
    is older than the racy window; then the check is written out of the cache."""
    monkeypatch.setattr(cache, "RACY_S", 3600.0)  # a slow machine stays inside the window
    dirs = [bundled_dir("kb"), _rules(tmp_path)]
    load_cached(dirs)
    (path,) = cache_home.rglob("kb-*.json")
    assert json.loads(path.read_bytes().splitlines()[0])["racy"], "the new rule file is racy"
    load_cached(dirs)
    assert json.loads(path.read_bytes().splitlines()[0])["racy"], "still inside the window"
    monkeypatch.setattr(cache, "RACY_S", -60.0)  # as if the window had passed
    kb, _ = load_cached(dirs)
    assert type(kb.causes).__name__ == "LazyEntries"
    assert json.loads(path.read_bytes().splitlines()[0])["racy"] == {}
    monkeypatch.setattr(cache, "_digest", lambda p: pytest.fail(f"hashed {p}"))
    warm, model = load_cached(dirs)
    assert model is not None and warm.causes["cached-cause"].prior == "rare"

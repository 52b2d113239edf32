"""bench/healthy_descriptions.py: its corpus of real threads whose training was fine."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddpadvisor.service import load_engine
from tests.support.bench_module import load_bench

bench = load_bench("healthy_descriptions")


def test_every_third_entry_is_held_out(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    rows = [f"- {{url: 'https://x/{i}', text: 't{i}', kind: k}}" for i in range(1, 7)]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    splits = [e.split for e in bench.load(path)]
    assert splits == ["tuned", "tuned", "heldout", "tuned", "tuned", "heldout"]


def test_a_malformed_entry_is_named(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("- {url: 'https://x/1', text: 't', kind: k}\n- {url: 'https://x/2'}\n")
    with pytest.raises(ValueError, match=r"c\.yaml: entry 2: needs url, text and kind"):
        bench.load(path)


def test_a_misleading_curve_or_normal_noise_is_no_fault() -> None:
    engine = load_engine()
    assert not bench.is_confident_fault(engine, "rank0-only-loss-logging", 0.9)
    assert not bench.is_confident_fault(engine, "expected-early-noise", 0.9)
    assert not bench.is_confident_fault(engine, "no-distributed-sampler", 0.29)
    assert bench.is_confident_fault(engine, "no-distributed-sampler", 0.30)


def test_the_corpus_cites_public_threads() -> None:
    entries = bench.load(bench.CORPUS)
    assert len(entries) >= 24
    assert len({e.url for e in entries}) == len(entries)
    assert all(e.url.startswith("https://") for e in entries)

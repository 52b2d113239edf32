"""The answers files of the two seed threads rank what an expert would suspect first.

Thread 000 (7B LoRA, 8x A100, batch 4 -> 32 with the LR scaled x8) is a confounded comparison:
the learning-rate scaling and the changed recipe lead, DDP mechanics do not. Thread 001
(13B LLaMA, 4x V100, PyTorch 2.0 + compile) is fp16 territory: V100 has no bf16.
"""

from __future__ import annotations

import json
import os
import subprocess
from functools import cache
from pathlib import Path

import pytest

from tests.conftest import PYTHON, REPO

EXAMPLES = REPO / "examples"


@cache
def diagnose(name: str) -> dict:  # type: ignore[type-arg]
    env = {**os.environ, "DDPADVISOR_NO_USER_KB": "1"}
    proc = subprocess.run(
        [PYTHON, "-m", "ddpadvisor", "--json", "--answers", str(EXAMPLES / name)],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def ranking(name: str) -> list[str]:
    return [c["id"] for c in diagnose(name)["causes"]]


@pytest.mark.parametrize("name", ["thread-000.yaml", "thread-001.yaml"])
def test_answers_file_is_clean(name: str) -> None:
    doc = diagnose(name)
    assert doc["warnings"] == []
    assert all(f["source"] == "answer" for f in doc["facts"])
    assert len(doc["facts"]) >= 5


def test_thread_000_points_at_the_changed_recipe() -> None:
    order = ranking("thread-000.yaml")
    assert order[0] == "lr-scaled-too-aggressively"
    assert "baseline-not-equivalent" in order[:3]
    assert "warmup-too-short" in order[:5]
    # The DDP mechanics the forum blamed are not supported by anything the poster said.
    for mechanics in ("no-sync-misaligned", "grad-scaler-state-diverged", "clip-on-local-grads"):
        assert order.index(mechanics) > order.index("baseline-not-equivalent")
    # A LoRA LLM has no BatchNorm to blame.
    assert order.index("batchnorm-without-syncbn") > order.index("warmup-too-short")


def test_thread_001_points_at_fp16_on_v100() -> None:
    # The thread never names the precision: the fp16 causes are in contention but may not lead
    # on an assumption (issue 13); they wait on `precision`, the question asked next.
    doc = diagnose("thread-001.yaml")
    order = ranking("thread-001.yaml")
    assert order[0] != "fp16-on-hardware-without-bf16"
    assert "fp16-on-hardware-without-bf16" in order[:3]
    waits = {c["id"]: c["waits_on"] for c in doc["causes"]}
    assert waits["fp16-on-hardware-without-bf16"] == ["precision"]
    assert "pure-low-precision-weights" in order[:4]
    assert "expected-early-noise" in order[:5]
    # compile is a cheap A/B worth suggesting, not the lead suspect.
    assert "torch-compile-ddp-interaction" in order[:8]
    assert order.index("torch-compile-ddp-interaction") > 2


def test_thread_001_asks_for_the_precision_next() -> None:
    questions = [q["fact"] for q in diagnose("thread-001.yaml")["next_questions"]]
    assert "precision" in questions[:3]


def test_examples_are_the_structured_answers_form() -> None:
    import yaml

    for path in sorted(Path(EXAMPLES).glob("thread-*.yaml")):
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        assert set(doc) <= {"description", "thread", "facts"}, path
        assert doc["description"].strip()
        assert isinstance(doc["facts"], dict) and doc["facts"]

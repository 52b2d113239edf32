"""Installed versions with a known defect, read from the environment dumps people paste."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ddpadvisor.evidence.files import versions
from ddpadvisor.evidence.gather import Sources, gather

PIP_LIST = """Package                  Version
------------------------ ----------
accelerate               1.0.1
torch                    2.4.0
transformers             {v}
"""
PIP_FREEZE = "accelerate==1.0.1\ndatasets==3.0.1\npeft==0.13.2\ntorch==2.4.0\ntransformers=={v}\n"
COLLECT_ENV = """PyTorch version: 2.4.0+cu121
Is debug build: False
CUDA used to build PyTorch: 12.1

Versions of relevant libraries:
[pip3] numpy==1.26.4
[pip3] torch==2.4.0
[pip3] transformers=={v}
"""
TRANSFORMERS_ENV = """- `transformers` version: {v}
- Platform: Linux-5.15.0-x86_64-with-glibc2.35
- Python version: 3.10.12
- PyTorch version (GPU?): 2.4.0+cu121 (True)
"""


def _facts(engine: Any, path: Path) -> dict[str, Any]:
    got = gather(engine.kb, Sources(attach=[str(path)]))
    return {o.fact: o for o in got.observations}


@pytest.mark.parametrize("dump", [PIP_LIST, PIP_FREEZE, COLLECT_ENV, TRANSFORMERS_ENV])
def test_a_transformers_release_before_the_accumulation_fix(
    engine: Any, tmp_path: Path, dump: str
) -> None:
    path = tmp_path / "env.txt"
    path.write_text(dump.format(v="4.45.2"), encoding="utf-8")
    got = _facts(engine, path)["trainer_loss_per_micro_batch"]
    assert got.value is True and got.source == "log"
    assert got.where.startswith("env.txt:") and "transformers 4.45.2" in (got.detail or "")


@pytest.mark.parametrize("version", ["4.46.0", "4.57.1", "5.2.0"])
def test_a_fixed_release_says_nothing(engine: Any, tmp_path: Path, version: str) -> None:
    path = tmp_path / "env.txt"
    path.write_text(PIP_FREEZE.format(v=version), encoding="utf-8")
    assert "trainer_loss_per_micro_batch" not in _facts(engine, path)


def test_the_defect_backs_token_normalisation_only_beside_accumulation(engine: Any) -> None:
    from ddpadvisor.observation import Observation
    from ddpadvisor.report.present import diagnose

    seen = Observation(fact="trainer_loss_per_micro_batch", value=True, source="log")
    setup = [
        Observation(fact=f, value=v, source="answer")
        for f, v in (("variable_length_sequences", True), ("loss_pattern", "oscillates"))
    ]
    accum = Observation(fact="grad_accum_steps", value=8, source="answer")
    single = Observation(fact="grad_accum_steps", value=1, source="answer")

    def score(*obs: Observation) -> float:
        d = diagnose(engine, list(obs))
        return next(c.score for c in d.causes if c.id == "accum-token-normalisation")

    assert score(seen, accum, *setup) > score(accum, *setup)
    assert score(seen, single, *setup) < 0.01  # no accumulation, nothing to normalise


def test_every_defect_row_cites_a_source_and_a_kb_fact(engine: Any) -> None:
    for row in versions.DEFECTS:
        assert row.url.startswith("https://") and row.since < row.before
        assert row.fact in engine.kb.facts
        assert engine.kb.facts[row.fact].sources == ["log"]

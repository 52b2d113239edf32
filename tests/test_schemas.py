"""The committed JSON Schemas are generated from the pydantic models; drift fails."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import REPO


@pytest.mark.parametrize(
    ("which", "path"), [("output", "diagnosis.schema.json"), ("kb", "kb.schema.json")]
)
def test_committed_schema_matches_models(which: str, path: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "ddpadvisor", "schema", which],
        capture_output=True,
        text=True,
        check=True,
    )
    committed = json.loads((REPO / "schemas" / path).read_text())
    assert json.loads(proc.stdout) == committed, (
        f"schemas/{path} is stale: run `ddpadvisor schema {which} > schemas/{path}`"
    )


def test_diagnosis_validates_against_schema(engine) -> None:  # type: ignore[no-untyped-def]
    jsonschema = pytest.importorskip("jsonschema")
    from ddpadvisor.evidence.answers import parse_set
    from ddpadvisor.report.present import diagnose

    obs = parse_set(engine.kb, ["single_gpu_converges=true", "uses_distributed_sampler=false"])
    doc = json.loads(diagnose(engine, obs).model_dump_json())
    schema = json.loads((REPO / "schemas" / "diagnosis.schema.json").read_text())
    jsonschema.validate(doc, schema)

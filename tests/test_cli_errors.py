"""Bad input: exit 2 and exactly one stderr line naming file, line and problem; no traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ddpadvisor", *args],
        capture_output=True,
        text=True,
        cwd=cwd or REPO,
        env={"DDPADVISOR_NO_USER_KB": "1", "PATH": "/usr/bin:/bin"},
        timeout=60,
    )


def assert_one_line_error(proc: subprocess.CompletedProcess[str], *needles: str) -> str:
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def test_unknown_fact_id_in_set() -> None:
    assert_one_line_error(
        run("--json", "--set", "uses_distrib_sampler=false"),
        "unknown fact id",
        "uses_distrib_sampler",
        "did you mean",
    )


def test_wrong_type_in_set() -> None:
    assert_one_line_error(
        run("--json", "--set", "grad_accum_steps=many"), "grad_accum_steps", "integer"
    )


def test_value_outside_enum() -> None:
    assert_one_line_error(run("--json", "--set", "precision=fp8"), "precision", "fp16_amp")


def test_set_without_equals() -> None:
    assert_one_line_error(run("--json", "--set", "precision"), "FACT=VALUE")


def test_unknown_fact_in_answers_names_line(tmp_path: Path) -> None:
    f = tmp_path / "answers.yaml"
    f.write_text("precision: bf16_amp\n\nnot_a_fact: true\n")
    assert_one_line_error(run("--json", "--answers", str(f)), f"{f}:3:", "not_a_fact")


def test_wrong_type_in_answers_names_line(tmp_path: Path) -> None:
    f = tmp_path / "answers.yaml"
    f.write_text("facts:\n  world_size: 8\n  uses_lora: maybe\n")
    assert_one_line_error(run("--json", "--answers", str(f)), f"{f}:3:", "uses_lora")


def test_malformed_yaml_reports_line(tmp_path: Path) -> None:
    f = tmp_path / "answers.yaml"
    f.write_text("precision: bf16_amp\nuses_lora: [true\nworld_size: 8\n")
    assert_one_line_error(run("--json", "--answers", str(f)), str(f), "malformed YAML")


def test_malformed_json_reports_line(tmp_path: Path) -> None:
    f = tmp_path / "answers.json"
    f.write_text('{\n  "precision": "bf16_amp",\n  "uses_lora": tru\n}\n')
    assert_one_line_error(run("--json", "--answers", str(f)), f"{f}:3:", "malformed JSON")


def test_missing_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    assert_one_line_error(run("--json", "--answers", str(missing)), str(missing), "no such file")


def test_directory_instead_of_file(tmp_path: Path) -> None:
    assert_one_line_error(run("--json", "--answers", str(tmp_path)), "directory")


def test_kb_folder_with_dangling_id(tmp_path: Path) -> None:
    (tmp_path / "mine.yaml").write_text(
        "causes:\n"
        "  - id: my-cause\n"
        "    title: Mine\n"
        "    area: data\n"
        "    prior: rare\n"
        "    mechanism: Something.\n"
        "    evidence:\n"
        "      - {fact: no_such_fact, is: true, strength: strong}\n"
        "    fixes: [no-such-fix]\n"
    )
    line = assert_one_line_error(run("--json", "--kb", str(tmp_path)), "mine.yaml:2")
    assert "no_such_fact" in line or "no-such-fix" in line


def test_kb_schema_error_names_field_and_line(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text(
        "facts:\n  - id: my_fact\n    type: boolean\n    question: Is it?\n    sources: [asked]\n"
    )
    assert_one_line_error(run("--json", "--kb", str(tmp_path)), "bad.yaml:3", "type")


def test_missing_kb_folder(tmp_path: Path) -> None:
    assert_one_line_error(run("--json", "--kb", str(tmp_path / "none")), "does not exist")


def test_unknown_option_is_one_line() -> None:
    proc = run("--json", "--frobnicate")
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("value", ["unknown", "UNKNOWN", ""])
def test_unknown_value_is_unobserved(value: str) -> None:
    import json

    proc = run("--json", "--set", f"uses_lora={value}")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["facts"] == []


def test_metadata_keys_warn_not_fail(tmp_path: Path) -> None:
    import json

    f = tmp_path / "a.yaml"
    f.write_text("description: mine\nfacts:\n  uses_lora: true\nmood: grumpy\n")
    proc = run("--json", "--answers", str(f))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert any("mood" in w for w in doc["warnings"])
    assert [x["fact"] for x in doc["facts"]] == ["uses_lora"]

"""KB loading: file:line errors, duplicate ids, explicit overrides, safe YAML."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ddpadvisor.bundled import bundled_dir
from ddpadvisor.kb.load import default_dirs, load_kb

CAUSE = """\
causes:
  - id: my-cause
    title: My cause
    area: data
    prior: rare
    mechanism: A thing happens.
    evidence:
      - {fact: uses_lora, is: true, strength: strong}
    fixes: [my-fix]
fixes:
  - id: my-fix
    title: Fix it
    steps: [Do the thing.]
    verify: {command: ddpadvisor kb test, expect: passes}
tests:
  - id: my-cause-first
    facts: {uses_lora: true, module_created_after_wrap: false}
    expect_in_top: [my-cause]
    k: 40
"""


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text)
    return path


def messages(kb) -> list[str]:  # type: ignore[no-untyped-def]
    return [str(p) for p in kb.problems]


def test_bundled_kb_loads_clean() -> None:
    kb = load_kb(default_dirs())
    assert messages(kb) == []
    assert kb.causes and kb.facts


def test_user_folder_adds_a_cause(tmp_path: Path) -> None:
    write(tmp_path, "mine.yaml", CAUSE)
    kb = load_kb(default_dirs([tmp_path]))
    assert messages(kb) == []
    assert "my-cause" in kb.causes


def test_schema_error_names_line_and_field(tmp_path: Path) -> None:
    write(tmp_path, "mine.yaml", CAUSE.replace("prior: rare", "prior: 1.7"))
    kb = load_kb([bundled_dir("kb"), tmp_path])
    msg = next(m for m in messages(kb) if "mine.yaml" in m)
    assert "mine.yaml:5:" in msg and "prior" in msg


def test_unknown_strength_level_is_reported(tmp_path: Path) -> None:
    write(tmp_path, "mine.yaml", CAUSE.replace("strength: strong", "strength: huge"))
    kb = load_kb([bundled_dir("kb"), tmp_path])
    assert any("mine.yaml:8:" in m and "strength" in m for m in messages(kb))


def test_duplicate_id_needs_explicit_override(tmp_path: Path) -> None:
    write(tmp_path, "a.yaml", CAUSE)
    write(tmp_path, "b.yaml", CAUSE.split("fixes:\n  - id")[0])
    kb = load_kb([bundled_dir("kb"), tmp_path])
    assert any("duplicate cause id 'my-cause'" in m and "b.yaml:2" in m for m in messages(kb))


def test_override_append_extends_lists(tmp_path: Path) -> None:
    write(
        tmp_path,
        "mine.yaml",
        """\
causes:
  - id: no-distributed-sampler
    override: append
    references:
      - {url: "https://example.org/my-notes"}
""",
    )
    base = load_kb([bundled_dir("kb")]).causes["no-distributed-sampler"]
    kb = load_kb([bundled_dir("kb"), tmp_path])
    assert messages(kb) == []
    merged = kb.causes["no-distributed-sampler"]
    assert len(merged.references) == len(base.references) + 1
    assert merged.evidence == base.evidence


def test_override_replace_swaps_fields(tmp_path: Path) -> None:
    write(
        tmp_path,
        "mine.yaml",
        """\
causes:
  - id: no-distributed-sampler
    override: replace
    prior: 0.5
""",
    )
    kb = load_kb([bundled_dir("kb"), tmp_path])
    assert messages(kb) == []
    assert kb.causes["no-distributed-sampler"].prior == 0.5


def test_override_of_unknown_id(tmp_path: Path) -> None:
    write(
        tmp_path, "mine.yaml", "causes:\n  - id: not-there\n    override: replace\n    prior: 0.1\n"
    )
    kb = load_kb([bundled_dir("kb"), tmp_path])
    assert any("mine.yaml:2" in m and "nothing to override" in m for m in messages(kb))


def test_predicate_value_checked_against_fact(tmp_path: Path) -> None:
    write(
        tmp_path,
        "mine.yaml",
        CAUSE.replace("{fact: uses_lora, is: true,", "{fact: precision, is: fp8,"),
    )
    kb = load_kb([bundled_dir("kb"), tmp_path])
    assert any("'fp8' is not a value of precision" in m for m in messages(kb))


def test_numeric_threshold_must_be_a_bin_edge(tmp_path: Path) -> None:
    write(
        tmp_path,
        "mine.yaml",
        CAUSE.replace("{fact: uses_lora, is: true,", "{fact: grad_accum_steps, ge: 3,"),
    )
    kb = load_kb([bundled_dir("kb"), tmp_path])
    assert any("no bin edge at 3" in m for m in messages(kb))


def test_cause_without_test_is_reported(tmp_path: Path) -> None:
    write(tmp_path, "mine.yaml", CAUSE.split("tests:")[0])
    kb = load_kb([bundled_dir("kb"), tmp_path])
    assert any("my-cause" in m and "no rule test" in m for m in messages(kb))


def test_yaml_tags_never_execute(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    write(tmp_path, "evil.yaml", f"facts: !!python/object/apply:os.system ['touch {marker}']\n")
    kb = load_kb([bundled_dir("kb"), tmp_path])
    assert not marker.exists()
    assert any("evil.yaml:1" in m for m in messages(kb))


def test_duplicate_yaml_key_is_an_error(tmp_path: Path) -> None:
    write(tmp_path, "dup.yaml", CAUSE.replace("    area: data\n", "    area: data\n    area: x\n"))
    kb = load_kb([bundled_dir("kb"), tmp_path])
    assert any("dup.yaml:5" in m and "duplicate key" in m for m in messages(kb))


def test_kb_validate_cli_lists_every_problem(tmp_path: Path) -> None:
    write(tmp_path, "one.yaml", CAUSE.replace("prior: rare", "prior: 7"))
    write(
        tmp_path,
        "two.yaml",
        "facts:\n  - id: Bad-Id\n    type: bool\n    question: q\n    sources: [asked]\n",
    )
    proc = subprocess.run(
        [sys.executable, "-m", "ddpadvisor", "kb", "validate", "--kb", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert "one.yaml:5" in proc.stderr and "two.yaml:2" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_kb_test_cli_exit_codes(tmp_path: Path) -> None:
    write(
        tmp_path,
        "mine.yaml",
        CAUSE.replace("expect_in_top: [my-cause]\n    k: 40", "expect_top: my-cause"),
    )
    write(
        tmp_path,
        "more.yaml",
        """\
tests:
  - id: impossible
    facts: {uses_lora: false}
    expect_top: my-cause
""",
    )
    proc = subprocess.run(
        [sys.executable, "-m", "ddpadvisor", "kb", "test", "--kb", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "FAIL" in proc.stdout and "impossible" in proc.stdout


def test_kb_graph_exports_dot_and_graphml(tmp_path: Path) -> None:
    out = tmp_path / "g.graphml"
    subprocess.run(
        [sys.executable, "-m", "ddpadvisor", "kb", "graph", "--format", "graphml", "-o", str(out)],
        check=True,
        capture_output=True,
    )
    import networkx as nx

    g = nx.read_graphml(out)
    assert "cause:no-distributed-sampler" in g
    dot = subprocess.run(
        [sys.executable, "-m", "ddpadvisor", "kb", "graph"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    assert dot.startswith("digraph") and "mechanism:ranks-read-same-data" in dot

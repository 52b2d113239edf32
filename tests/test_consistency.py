"""Names that live in two places stay in step: subcommands, probes, README examples."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from ddpadvisor import cli
from ddpadvisor.kb import check
from tests.conftest import REPO


def test_verify_checker_knows_every_subcommand() -> None:
    assert set(cli.SUBCOMMANDS) == check.SUBCOMMANDS


def test_every_catalogued_probe_has_its_file() -> None:
    from ddpadvisor.bundled import probe_catalog

    for name in probe_catalog():
        assert (REPO / "probes" / f"{name}.py").is_file()


def test_readme_rule_example_validates_and_passes(tmp_path: Path) -> None:
    """The 'Adding a rule' example in the README is real: it loads and its test passes."""
    readme = (REPO / "README.md").read_text()
    block = re.search(r"```yaml\n(.*?)```", readme, re.S)
    assert block, "README has no yaml example"
    rules = tmp_path / "my-rules"
    rules.mkdir()
    (rules / "rule.yaml").write_text(block.group(1))
    for cmd in ("validate", "test"):
        proc = subprocess.run(
            [sys.executable, "-m", "ddpadvisor", "kb", cmd, "--kb", str(rules)],
            capture_output=True,
            text=True,
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr


def test_verify_checker_reads_option_values_as_values() -> None:
    assert (
        check.verify_command_problem("ddpadvisor probe checksums --nproc 2 --backend gloo") is None
    )
    assert "unknown probe" in (check.verify_command_problem("ddpadvisor probe chksum") or "")
    assert "unknown ddpadvisor subcommand" in (
        check.verify_command_problem("ddpadvisor frob") or ""
    )

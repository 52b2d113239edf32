"""``--script`` on awkward input: clear one-line errors, big files, and never running the code."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from ddpadvisor.cli import main as cli_main
from ddpadvisor.errors import InputError
from ddpadvisor.scan import scan_file
from tests.conftest import REPO
from tests.scan_support import fixture_path
from tests.support.bench_module import load_bench


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ddpadvisor", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={"DDPADVISOR_NO_USER_KB": "1", "PATH": "/usr/bin:/bin"},
        timeout=120,
    )


def error_of(path: Path) -> InputError:
    with pytest.raises(InputError) as info:
        scan_file(path)
    return info.value


def test_missing_file(tmp_path: Path) -> None:
    err = error_of(tmp_path / "nope.py")
    assert err.file is not None and err.file.endswith("nope.py")
    assert "no such file" in err.message


def test_directory_instead_of_file(tmp_path: Path) -> None:
    err = error_of(tmp_path)
    assert "directory" in err.message


def test_syntax_error_names_file_line_and_parser_message(tmp_path: Path) -> None:
    path = tmp_path / "train.py"
    path.write_text("import torch\n\nfor epoch in range(3)\n    pass\n")
    err = error_of(path)
    assert err.line == 3
    assert "syntax error" in err.message and "expected ':'" in err.message


def test_not_utf8_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "train.py"
    path.write_bytes(b"import torch\nx = 1\n# caf\xe9 \xff\xfe\n")
    err = error_of(path)
    assert err.line == 3
    assert "utf-8" in err.message.lower()


def test_declared_latin1_encoding_is_honoured(tmp_path: Path) -> None:
    path = tmp_path / "train.py"
    path.write_bytes(b"# -*- coding: latin-1 -*-\n# caf\xe9\nimport torch\n")
    assert scan_file(path).findings == []


def test_binary_file(tmp_path: Path) -> None:
    path = tmp_path / "model.pt"
    path.write_bytes(b"PK\x03\x04\x00\x00\x00\x00" * 100)
    with pytest.raises(InputError):
        scan_file(path)


def test_empty_file_is_a_result_not_an_error(tmp_path: Path) -> None:
    path = tmp_path / "train.py"
    path.write_text("")
    result = scan_file(path)
    assert result.findings == []
    assert any("no backward()" in w for w in result.warnings)


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (None, "is a directory"),
        (b"def f(:\n", "syntax error"),
        (b"\xff\xfe\x00bad", "utf-8"),
    ],
)
def test_cli_prints_one_line_and_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes | None, needle: str
) -> None:
    target = tmp_path / "train.py"
    if content is None:
        target.mkdir()
    else:
        target.write_bytes(content)
    assert cli_main(["--json", "--script", str(target)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err
    assert "train.py" in lines[0] and needle in lines[0].lower()


def test_real_cli_process_reports_syntax_error_without_traceback(tmp_path: Path) -> None:
    target = tmp_path / "train.py"
    target.write_text("import torch\nwhile True print(1)\n")
    proc = run_cli("--json", "--script", str(target))
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert "train.py:2: syntax error" in proc.stderr


def test_ten_thousand_lines_scan_to_a_result(tmp_path: Path) -> None:
    path = tmp_path / "huge_train.py"
    path.write_text(load_bench("scan_speed").generate(10_000))
    assert path.read_text().count("\n") >= 10_000
    result = scan_file(path)
    facts = {f.fact: f.value for f in result.findings}
    # The training loop sits at the very end of the file: the scan reached it.
    assert facts["grad_accum_steps"] == 4
    assert facts["uses_no_sync"] is True
    assert facts["final_micro_step_synced"] is True
    assert not any("stopped early" in w for w in result.warnings)


def test_scanned_script_is_never_executed(tmp_path: Path) -> None:
    """Scanning must not import the script or the sibling modules it imports."""
    marker = tmp_path / "EXECUTED"
    sibling_marker = tmp_path / "SIBLING_EXECUTED"
    (tmp_path / "helpers.py").write_text(
        f"from pathlib import Path\nPath({str(sibling_marker)!r}).write_text('x')\n"
        "def build():\n    return None\n"
    )
    script = tmp_path / "train.py"
    script.write_text(
        "from pathlib import Path\n"
        f"Path({str(marker)!r}).write_text('x')\n"
        "import helpers\n"
        "import torch\n"
        "from torch.nn.parallel import DistributedDataParallel as DDP\n"
        "model = DDP(helpers.build())\n"
        "raise SystemExit('the scanner ran me')\n"
    )
    result = scan_file(script)
    assert not marker.exists()
    assert not sibling_marker.exists()
    assert result.framework is None
    buf = io.StringIO()
    with redirect_stdout(buf):
        assert cli_main(["--json", "--script", str(script)]) == 0
    assert not marker.exists() and not sibling_marker.exists()
    assert json.loads(buf.getvalue())["schema_version"]


def test_scan_does_not_import_torch() -> None:
    code = (
        "import sys\n"
        "from ddpadvisor.scan import scan_file\n"
        f"scan_file({str(fixture_path('healthy_full.py'))!r})\n"
        "assert 'torch' not in sys.modules, 'torch imported'\n"
        "assert 'transformers' not in sys.modules\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


def test_sibling_module_with_syntax_error_is_a_warning(tmp_path: Path) -> None:
    (tmp_path / "model.py").write_text("class Net(:\n")
    script = tmp_path / "train.py"
    script.write_text("from model import Net\nimport torch\nnet = Net()\n")
    result = scan_file(script)
    assert any("model.py:1" in w and "not scanned" in w for w in result.warnings)


def test_cli_defaults_become_hints_not_facts() -> None:
    """A scanned fact outranks --set, so a mere argparse default must not become one."""
    result = scan_file(fixture_path("cli_defaults.py"))
    assert result.value("grad_accum_steps") is None
    assert any("--set grad_accum_steps=4" in w for w in result.warnings)
    assert any("--set uses_torch_compile=false" in w for w in result.warnings)
    # The structure does not depend on the defaults and is still reported.
    assert result.value("loss_divided_by_accum") is True


def test_a_cli_default_hint_goes_once_another_source_gives_the_fact(engine) -> None:  # type: ignore[no-untyped-def]
    """'pass --set X=V' is moot when --set (or the trace of the run) already gave X."""
    from ddpadvisor.evidence.gather import Sources, gather

    script = fixture_path("cli_defaults.py")
    kb = engine.kb
    alone = gather(kb, Sources(scripts=[script])).warnings
    assert any("--set grad_accum_steps=4" in w for w in alone)
    given = gather(kb, Sources(scripts=[script], sets=["grad_accum_steps=2"])).warnings
    assert not any("grad_accum_steps" in w and "command-line default" in w for w in given)
    # a hint about a fact nobody gave stays
    assert any("--set uses_torch_compile=false" in w for w in given)


def test_very_deep_expression_is_skipped_with_a_warning(tmp_path: Path) -> None:
    """1,200 chained terms parse, but are deeper than the walker's stack: that statement is
    skipped with a warning naming its line, and the rest of the script is still read."""
    script = tmp_path / "train.py"
    ones = " + ".join(["1"] * 1200)
    script.write_text(
        "import torch\n"
        "from torch.utils.data import DataLoader, DistributedSampler\n"
        f"total = {ones}\n"
        "ds = list(range(100))\n"
        "loader = DataLoader(ds, sampler=DistributedSampler(ds))\n"
    )
    result = scan_file(script)
    assert any(w.startswith("train.py:3:") and "too deep" in w for w in result.warnings)
    assert result.value("uses_distributed_sampler") is True
    proc = run_cli("--json", "--script", str(script))
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr


def test_the_scanned_code_s_own_compiler_warnings_are_not_printed(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """An invalid escape in the user's string literal is the user's business: the scan reads
    the file without echoing its text through the compiler's SyntaxWarning."""
    import subprocess
    import sys

    script = tmp_path / "train.py"
    script.write_text('import re\nPATTERN = re.compile("\\(\\d+\\)")\nprint(PATTERN)\n')
    proc = subprocess.run(
        [sys.executable, "-W", "default", "-m", "ddpadvisor", "--json", "--script", str(script)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "invalid escape" not in proc.stderr and "Warning" not in proc.stderr

"""Conditional bindings the scan cannot decide: each readable alternative is read, and a fact
the readings decide differently is left undecided with a note that says where and why."""

from __future__ import annotations

from pathlib import Path

from ddpadvisor.scan import MAX_SITES, scan_file
from tests.scan_support import FIXTURES


def _line_of(path: Path, start: str) -> int:
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.startswith(start):
            return n
    raise AssertionError(f"{path.name}: no line starting with {start!r}")


def test_contested_fact_names_the_if_and_the_name() -> None:
    path = FIXTURES / "data" / "rebound_loader_differs.py"
    result = scan_file(path, strict=True)
    line = _line_of(path, "if os.environ")
    notes = [w for w in result.warnings if "uses_distributed_sampler depends" in w]
    assert notes, result.warnings
    assert notes[0].startswith(f"{path.name}:{line}:")
    assert "binds get_loader" in notes[0]
    assert result.value("uses_distributed_sampler") is None


def test_opaque_alternative_leaves_no_note() -> None:
    path = FIXTURES / "data" / "rebound_loader_opaque_double.py"
    result = scan_file(path, strict=True)
    assert result.value("uses_distributed_sampler") is True
    assert not [w for w in result.warnings if "depends on which side" in w]


def _switches(n: int) -> list[str]:
    lines = ["import os", "import torch", "from torch.nn.parallel import DistributedDataParallel"]
    for i in range(n):
        lines += [f"lr{i} = 0.1", f"if os.environ.get('SWITCH{i}'):", f"    lr{i} = 0.2"]
    return lines


def test_sites_past_the_cap_are_reported(tmp_path: Path) -> None:
    n = MAX_SITES + 2
    lines = [
        *_switches(n),
        "torch.distributed.init_process_group('gloo')",
        "model = DistributedDataParallel(torch.nn.Linear(4, 1))",
        "opt = torch.optim.SGD(model.parameters(), lr=lr0)",
    ]
    script = tmp_path / "many_switches.py"
    script.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = scan_file(script, strict=True)
    notes = [w for w in result.warnings if "more conditional bindings" in w]
    assert notes and f"{n - MAX_SITES} more" in notes[0], result.warnings


def test_a_switched_function_is_read_before_switched_constants(tmp_path: Path) -> None:
    # The loader switch comes after more constant switches than the cap: it is still read.
    fixture = (FIXTURES / "data" / "rebound_loader_differs.py").read_text(encoding="utf-8")
    script = tmp_path / "switches_then_loader.py"
    script.write_text("\n".join(_switches(MAX_SITES + 2)) + "\n" + fixture, encoding="utf-8")
    (tmp_path / "_toy.py").write_text(
        (FIXTURES / "_toy.py").read_text(encoding="utf-8"), encoding="utf-8"
    )
    result = scan_file(script, strict=True)
    assert result.value("uses_distributed_sampler") is None
    assert [w for w in result.warnings if "binds get_loader" in w], result.warnings

"""Conditional bindings the scan cannot decide: each readable alternative is read, and a fact
the readings decide differently is left undecided with a note that says where and why."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddpadvisor.scan import MAX_SITES, scan_file
from tests.scan_support import FIXTURES, fixture_path


def _line_of(path: Path, start: str) -> int:
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.startswith(start):
            return n
    raise AssertionError(f"{path.name}: no line starting with {start!r}")


def test_contested_fact_names_the_if_and_the_name() -> None:
    path = fixture_path("rebound_loader_differs.py")
    result = scan_file(path, strict=True)
    line = _line_of(path, "if os.environ")
    notes = [w for w in result.warnings if "uses_distributed_sampler depends" in w]
    assert notes, result.warnings
    assert notes[0].startswith(f"{path.name}:{line}:")
    assert "binds get_loader" in notes[0]
    assert result.value("uses_distributed_sampler") is None


def test_opaque_alternative_leaves_no_note() -> None:
    path = fixture_path("rebound_loader_opaque_double.py")
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
    fixture = (fixture_path("rebound_loader_differs.py")).read_text(encoding="utf-8")
    script = tmp_path / "switches_then_loader.py"
    script.write_text("\n".join(_switches(MAX_SITES + 2)) + "\n" + fixture, encoding="utf-8")
    (tmp_path / "_toy.py").write_text(
        (FIXTURES / "_toy.py").read_text(encoding="utf-8"), encoding="utf-8"
    )
    result = scan_file(script, strict=True)
    assert result.value("uses_distributed_sampler") is None
    assert [w for w in result.warnings if "binds get_loader" in w], result.warnings


# -- branches by their meaning under DDP (interp/branches.py) ---------------------------------

_PRELUDE = """\
import os
import argparse
import torch.distributed as dist
parser = argparse.ArgumentParser()
parser.add_argument("--distributed", action="store_true")
parser.add_argument("--local_rank", type=int, default=-1)
parser.add_argument("--n_gpu", type=int, default=1)
args = parser.parse_args()
world_size = int(os.environ["WORLD_SIZE"])
rank = int(os.environ["RANK"])
def is_main_process():
    return rank == 0
"""


def _sides(tmp_path: Path, test: str, init_first: bool = False) -> tuple[object, object]:
    """The job meaning and whether each side of ``if <test>:`` was read: (body, else)."""
    from ddpadvisor.scan.interp import Walker
    from ddpadvisor.scan.source import load

    init = "dist.init_process_group('nccl')\n" if init_first else ""
    code = f"{_PRELUDE}{init}if {test}:\n    print('body')\nelse:\n    print('other')\n"
    script = tmp_path / "sides.py"
    script.write_text(code, encoding="utf-8")
    walk = Walker(load(script)).run()
    seen: dict[str, object] = {}
    for e in walk.events:
        if e.name == "print" and e.args and e.args[0].known:
            conds = e.conds()
            seen[str(e.args[0].const)] = conds[-1].runs if conds else "unconditional"
    return seen.get("body"), seen.get("other")


@pytest.mark.parametrize(
    ("test", "body", "other"),
    [
        ("world_size > 1", "all", None),  # only the multi-rank side is read
        ("1 < world_size", "all", None),
        ("dist.get_world_size() >= 2", "all", None),
        ("world_size == 1", None, "all"),
        ("not args.distributed", None, "all"),
        ("args.distributed", "all", None),  # a command-line default does not decide it
        ("args.local_rank == -1", None, "all"),  # torch.distributed.launch's convention
        ("rank == 0", "some", "some"),  # both run, on different ranks
        ("is_main_process()", "some", "some"),
        ("args.n_gpu > 1", None, None),  # GPUs on a node: an alternative
        ("args.distributed and os.environ.get('X')", None, None),
        ("world_size == 1 and os.environ.get('X')", None, "all"),
        ("os.environ.get('X') and is_main_process()", "some", "some"),  # a subset at most
    ],
)
def test_branch_meaning_under_ddp(tmp_path: Path, test: str, body: object, other: object) -> None:
    got = _sides(tmp_path, test)
    # an alternative's sides are both read, with no meaning (None)
    assert got == (body, other), (test, got)


def test_state_check_counts_only_after_the_set_up(tmp_path: Path) -> None:
    # ``if not dist.is_initialized(): dist.init_process_group()`` runs on every rank
    assert _sides(tmp_path, "dist.is_initialized()") == (None, None)
    assert _sides(tmp_path, "dist.is_initialized()", init_first=True) == ("all", None)


def test_single_process_side_binds_nothing(tmp_path: Path) -> None:
    from ddpadvisor.scan.interp import Walker
    from ddpadvisor.scan.source import load

    script = tmp_path / "bind.py"
    script.write_text(
        f"{_PRELUDE}lr = 0.1\nif world_size == 1:\n    lr = 0.5\nprint(lr)\n", encoding="utf-8"
    )
    walk = Walker(load(script)).run()
    printed = [e.args[0].const for e in walk.events if e.name == "print" and e.args]
    assert printed == [0.1]


def test_alternative_bypass_is_left_undecided_with_a_note() -> None:
    path = fixture_path("bypass_switch_undecided.py")
    result = scan_file(path, strict=True)
    assert result.value("forward_bypasses_ddp") is None
    notes = [w for w in result.warnings if "around the DDP wrapper" in w]
    assert notes and notes[0].startswith(f"{path.name}:{_line_of(path, '        out =')}:")


def test_value_bound_per_rank_depends_on_the_rank(tmp_path: Path) -> None:
    from ddpadvisor.scan import values as V
    from ddpadvisor.scan.interp import Walker
    from ddpadvisor.scan.source import load

    script = tmp_path / "per_rank.py"
    script.write_text(
        f"{_PRELUDE}ckpt = None\nif os.environ.get('CKPT') and is_main_process():\n"
        "    ckpt = os.environ['CKPT']\nprint(ckpt)\nlr = 0.1\nif os.environ.get('X'):\n"
        "    lr = 0.2\nprint(lr)\n",
        encoding="utf-8",
    )
    walk = Walker(load(script)).run()
    printed = [e.args[0] for e in walk.events if e.name == "print" and e.args]
    assert V.RANK in printed[0].taint  # set on the main process only
    assert V.RANK not in printed[1].taint  # an alternative, the same on every rank


def test_global_statements_rebind_the_module_s_names(tmp_path: Path) -> None:
    """``global _ready`` / ``global _count`` inside a function: assignments and augmented
    assignments there change the module's binding, which later reads see."""
    from ddpadvisor.scan.interp import Walker
    from ddpadvisor.scan.source import load

    script = tmp_path / "train.py"
    script.write_text(
        "_ready = False\n_count = 0\n"
        "def start():\n    global _ready, _count\n    _ready = True\n    _count += 2\n"
        "def local_only():\n    _count = 10\n    return _count\n"
        "start()\nlocal_only()\nseen = (_ready, _count)\n"
    )
    walker = Walker(load(script))
    walker.run()
    seen = walker.sources.main
    scope = walker._scope(seen)
    assert scope.globals["_ready"].const is True
    assert scope.globals["_count"].const == 2  # the local of local_only() does not leak

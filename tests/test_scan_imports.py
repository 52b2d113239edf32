"""Imports followed as Python resolves them: package imports from the project root, ``src/``
layouts, scripts inside a package, relative imports, namespace packages, recipe classes and
their base classes in other modules; bounded, with one warning naming what was not read.

Each layout under ``tests/scan_fixtures/imports/<layout>/`` is a small repository; its entry
script is scanned and every file in it is checked against its annotations (``# expect:``,
``# ok:``, ``# scan-facts:``), with the file named as the scan names it."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddpadvisor.scan import ScanResult, scan_file, source
from ddpadvisor.scan.interp import Walker
from ddpadvisor.scan.source import load, search_paths
from tests.scan_support import CAUSE_FACTS, FIXTURES, matches, parse_fixture, typed

LAYOUTS = FIXTURES / "imports"
ENTRIES = {
    "pkg_root": "tools/train.py",  # a package imported by name from the project root
    "src_layout": "scripts/finetune.py",  # src/ layout, recipe class over a base class
    "script_in_pkg": "rlhf/cli/train_dpo.py",  # relative imports, super(), namespace package
    "shadow": "train.py",  # names of third-party packages, a folder named torch
}


def _label(layout: Path, entry: Path, path: Path) -> str:
    try:
        return path.relative_to(entry.parent).as_posix()
    except ValueError:
        return path.relative_to(layout).as_posix()


def _dump(result: ScanResult) -> str:
    return "\n".join(f"  {f.where:>32} {f.fact}={f.value}" for f in result.findings)


@pytest.mark.parametrize("name", sorted(ENTRIES))
def test_layout_annotations(name: str) -> None:
    layout = LAYOUTS / name
    entry = layout / ENTRIES[name]
    result = scan_file(entry, strict=True)
    # (a model class from a package outside the repository, ``models.Net()`` in "shadow", is
    # built where the scan does not read: precision is left open with that note, by design)
    unread_model = "the trained model is built where the scan does not read"
    assert not [w for w in result.warnings if unread_model not in w], result.warnings
    checked = 0
    for path in sorted(layout.rglob("*.py")):
        fx = parse_fixture(path)
        label = _label(layout, entry, path)
        for line, cause in fx.expect + fx.ok:
            where = f"{label}:{line}"
            hits = [
                f
                for fact, check in CAUSE_FACTS[cause]
                for f in result.findings
                if f.fact == fact and f.where == where and matches(check, f.value)
            ]
            if (line, cause) in fx.expect:
                assert hits, f"{where}: expected {cause}; the scan reported:\n{_dump(result)}"
            else:
                assert not hits, f"{where}: lookalike reported as {cause}"
            checked += 1
        for fact, want in fx.facts.items():
            got = result.value(fact)
            expected = None if want == "unknown" else typed(want)
            assert got == expected, f"{label}: {fact}: want {want}, got {got}\n{_dump(result)}"
            checked += 1
    assert checked >= 3


def _walk(entry: Path) -> Walker:
    walker = Walker(load(entry))
    walker.run()
    return walker


def test_modules_get_their_real_dotted_names() -> None:
    walker = _walk(LAYOUTS / "script_in_pkg" / ENTRIES["script_in_pkg"])
    read = set(walker.sources.modules)
    # ``from ..trainer import PairTrainer`` inside rlhf/cli: rlhf.trainer, and its own
    # ``from .pair import`` / ``from ..vendor.hf_trainer import`` resolve against it.
    assert {"rlhf.trainer", "rlhf.trainer.pair", "rlhf.vendor.hf_trainer"} <= read
    assert "rlhf.losses.pairwise" in read  # a module of a namespace package
    assert walker.sources.main.package == "rlhf.cli"


def test_search_path_follows_python() -> None:
    entry = (LAYOUTS / "script_in_pkg" / ENTRIES["script_in_pkg"]).resolve()
    paths, _project, package = search_paths(entry)
    assert paths[0] == entry.parent  # the script's folder first
    assert paths[1] == LAYOUTS.resolve() / "script_in_pkg"  # then the folder above rlhf/
    assert package == "rlhf.cli"
    src = (LAYOUTS / "src_layout" / ENTRIES["src_layout"]).resolve()
    paths, project, package = search_paths(src)
    assert project == LAYOUTS.resolve() / "src_layout"  # setup.cfg marks the root
    assert project / "src" in paths and package == ""


def test_unused_import_of_a_package_is_never_read() -> None:
    """detlib/__init__.py imports export.py (not Python at all); no training code uses it."""
    walker = _walk(LAYOUTS / "pkg_root" / ENTRIES["pkg_root"])
    assert "detlib.engine" in walker.sources.modules
    assert "detlib.export" not in walker.sources.modules
    assert not walker.sources.warnings


def test_library_and_preloaded_names_stay_the_library_s(tmp_path: Path) -> None:
    walker = _walk(LAYOUTS / "shadow" / ENTRIES["shadow"])
    read = set(walker.sources.modules)
    assert "utils" in read  # the script's folder comes first, as in Python
    assert "data.loaders" in read
    assert "torch" not in read and "torch.distributed" not in read
    assert "models" not in read and "models" in walker.sources.missing
    (tmp_path / "os.py").write_text("raise SystemExit\n")
    (tmp_path / "train.py").write_text("import os\nimport os.path\nworld = os.environ.get('X')\n")
    assert not _walk(tmp_path / "train.py").sources.modules


def test_relative_import_in_a_package_init(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from .loop import run\n")
    (pkg / "loop.py").write_text(
        "def run(model, opt, x):\n    model(x).sum().backward()\n    opt.step()\n"
    )
    (tmp_path / "train.py").write_text(
        "import torch\nfrom torch.nn.parallel import DistributedDataParallel as DDP\n"
        "import pkg\nmodel = DDP(torch.nn.Linear(2, 2))\n"
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\npkg.run(model, opt, torch.ones(2))\n"
    )
    result = scan_file(tmp_path / "train.py", strict=True)
    assert result.value("hand_written_loop") is True
    assert any(f.where.startswith("pkg/loop.py:") for f in result.findings)


def test_modules_past_the_budget_are_named_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(source, "MAX_SIBLINGS", 2)
    for i in range(5):
        (tmp_path / f"m{i}.py").write_text(f"def f{i}():\n    return {i}\n")
    (tmp_path / "train.py").write_text(
        "".join(f"from m{i} import f{i}\n" for i in range(5)) + "f0()\nf4()\n"
    )
    result = scan_file(tmp_path / "train.py")
    said = [w for w in result.warnings if "not read" in w]
    assert len(said) == 1, result.warnings
    assert "m2.py" in said[0] and "m4.py" in said[0] and "m0.py" not in said[0]


def test_broken_module_is_a_warning_not_an_error(tmp_path: Path) -> None:
    (tmp_path / "helpers.py").write_text("def f(:\n")
    (tmp_path / "train.py").write_text("from helpers import f\nf()\n")
    result = scan_file(tmp_path / "train.py")
    assert any("helpers.py:1" in w and "not scanned" in w for w in result.warnings)


def test_type_checking_imports_are_not_read(tmp_path: Path) -> None:
    (tmp_path / "heavy.py").write_text("def f(:\n")  # not Python: reading it would warn
    (tmp_path / "helpers.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from heavy import f\n"
        "def step(x):\n    return x\n"
    )
    (tmp_path / "train.py").write_text("from helpers import step\nstep(1)\n")
    walker = _walk(tmp_path / "train.py")
    assert "helpers" in walker.sources.modules
    assert "heavy" not in walker.sources.modules and not walker.sources.warnings


def test_super_reaches_a_base_class_in_another_module() -> None:
    """PairTrainer.__init__ calls super().__init__(PolicyNet(), lr): the vendored base class
    in rlhf/vendor/hf_trainer.py wraps the model in DDP."""
    result = scan_file(LAYOUTS / "script_in_pkg" / ENTRIES["script_in_pkg"], strict=True)
    assert result.value("uses_fsdp_or_zero") is False  # plain DDP, built in the base class
    assert any(f.where.startswith("rlhf/vendor/hf_trainer.py:") for f in result.findings)


def test_package_chain_stops_at_the_project_root(tmp_path: Path) -> None:
    """A repository whose root holds an __init__.py: its parent folder (and the projects
    beside it) never joins the search path."""
    repo = tmp_path / "repo"
    (repo / "tools").mkdir(parents=True)
    (repo / "pyproject.toml").write_text("[project]\nname = 'repo'\n")
    (repo / "__init__.py").write_text("")
    (repo / "tools" / "__init__.py").write_text("")
    (repo / "tools" / "train.py").write_text("import neighbour\n")
    (tmp_path / "neighbour").mkdir()
    (tmp_path / "neighbour" / "__init__.py").write_text("X = 1\n")
    paths, project, package = search_paths((repo / "tools" / "train.py").resolve())
    assert project == repo.resolve() and package == "tools"
    assert tmp_path.resolve() not in paths
    assert "neighbour" not in _walk(repo / "tools" / "train.py").sources.modules


def test_a_file_named_like_a_library_beside_the_script_is_the_project_s(tmp_path: Path) -> None:
    """``datasets.py`` beside the script is what ``import datasets`` loads (the script's folder
    comes first on sys.path); a ``datasets/`` package folder or a name elsewhere stays the
    library's, read through the scan's own view."""
    (tmp_path / "datasets.py").write_text("def build(n):\n    return list(range(n))\n")
    (tmp_path / "train.py").write_text(
        "import datasets\nfrom datasets import build\nimport datasets.arrow\nrows = build(4)\n"
    )
    read = _walk(tmp_path / "train.py").sources
    assert "datasets" in read.modules
    assert "datasets.arrow" not in read.modules  # a single file has no submodules
    other = tmp_path / "other"
    (other / "datasets").mkdir(parents=True)
    (other / "datasets" / "__init__.py").write_text("def load_dataset(p):\n    return p\n")
    (other / "train.py").write_text("from datasets import load_dataset\nd = load_dataset('x')\n")
    assert "datasets" not in _walk(other / "train.py").sources.modules


def test_a_class_picked_by_the_runs_name_from_a_project_module_is_named(tmp_path: Path) -> None:
    """``getattr(trainers, cfg.trainer)``: a member of the project's module picked by a name the
    run sets is not followed, and the warning says where and by what; a constant name is
    followed as the attribute it names (no warning)."""
    (tmp_path / "trainers.py").write_text(
        "class SFTTrainer:\n    def train(self):\n        pass\n\n\n"
        "class KTOTrainer(SFTTrainer):\n    pass\n"
    )
    (tmp_path / "launch.py").write_text(
        "import sys\n\nimport trainers\n\n"
        "cfg = {'trainer': sys.argv[1]}\n"
        "TrainerClass = getattr(trainers, cfg['trainer'])\n"
        "TrainerClass().train()\n"
        "Fixed = getattr(trainers, 'SFTTrainer')\n"
    )
    warnings = scan_file(tmp_path / "launch.py").warnings
    picked = [w for w in warnings if "picked by" in w]
    assert picked == [
        "launch.py:6: trainers.py member picked by cfg['trainer'] (the run's name); "
        "the code it names is not followed"
    ]

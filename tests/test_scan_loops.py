"""Loops over anything that yields a DataLoader's batches are loops over that loader: the
training loop and the epoch loop are found by data flow, whatever wraps the loader."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddpadvisor.scan import scan_file
from ddpadvisor.scan.analysis import Analysis
from ddpadvisor.scan.interp import Walker
from ddpadvisor.scan.source import load
from tests.scan_support import FIXTURES, fixture_path


def _analysis(path: Path) -> Analysis:
    return Analysis(Walker(load(path)).run())


def _line(path: Path, text: str) -> int:
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if text in line:
            return n
    raise AssertionError(f"{path.name}: no line with {text!r}")


@pytest.mark.parametrize(
    ("fixture", "loop_text", "loader_text"),
    [
        ("log_every_set_epoch_missing.py", "for epoch in", "data_loader = DataLoader"),
        ("log_every_with_eval_ok.py", "for epoch in", "loader_train = DataLoader"),
        ("tqdm_set_epoch_missing.py", "for epoch in", "loader = DataLoader"),
        ("prefetcher_set_epoch_missing.py", "for epoch in", "loader = DataLoader"),
        ("iter_next_set_epoch_ok.py", "for epoch in", "loader = DataLoader"),
        ("generator_wrapper_set_epoch_missing.py", "for epoch in", "loader = DataLoader"),
    ],
)
def test_epoch_loop_and_training_loader(fixture: str, loop_text: str, loader_text: str) -> None:
    path = fixture_path(fixture)
    a = _analysis(path)
    loaders = a.training_loaders
    assert len(loaders) == 1, loaders
    assert a.objects[loaders[0]].line == _line(path, loader_text)
    loop, found = a.epoch_loop(loaders[0])
    assert found and loop is not None
    assert loop.line == _line(path, loop_text)


def test_zip_reads_both_loaders() -> None:
    a = _analysis(fixture_path("zip_loaders_set_epoch_missing.py"))
    assert len(a.training_loaders) == 2


def test_micro_batches_of_a_batch_are_not_a_loader_loop() -> None:
    path = fixture_path("generator_wrapper_set_epoch_missing.py")
    a = _analysis(path)
    b = a.main_backward
    assert b is not None
    micro = b.loops()[-1]
    assert micro.line == _line(path, "for micro in")
    assert not a.loop_loaders(micro)


def test_priming_next_does_not_make_the_epoch_loop_a_batch_loop() -> None:
    # The prefetcher's first next() runs once per epoch, beside the iter() that starts the
    # pass: the epoch loop repeats passes, it does not take batches.
    path = fixture_path("prefetcher_set_epoch_missing.py")
    a = _analysis(path)
    epoch = next(loop for loop in a.walk.loops if loop.line == _line(path, "for epoch in"))
    step = next(loop for loop in a.walk.loops if loop.line == _line(path, "    while batch"))
    assert not a.loop_loaders(epoch)
    assert a.loop_loaders(step) == frozenset(a.training_loaders)


def test_unread_wrapper_says_why_set_epoch_is_undecided() -> None:
    path = fixture_path("opaque_wrapper_undecided.py")
    result = scan_file(path, strict=True)
    assert result.value("calls_set_epoch") is None
    notes = [w for w in result.warnings if "device_prefetch" in w and "set_epoch" in w]
    assert notes, result.warnings


def test_loop_over_an_object_with_iter(tmp_path: Path) -> None:
    (tmp_path / "_toy.py").write_text(
        (FIXTURES / "_toy.py").read_text(encoding="utf-8"), encoding="utf-8"
    )
    script = tmp_path / "wrapped.py"
    script.write_text(
        "\n".join(
            [
                "import torch",
                "import torch.distributed as dist",
                "from torch.nn.parallel import DistributedDataParallel as DDP",
                "from torch.utils.data import DataLoader, DistributedSampler",
                "from _toy import ToyDataset, ToyNet",
                "class OnDevice:",
                "    def __init__(self, loader):",
                "        self.loader = loader",
                "    def __iter__(self):",
                "        for b in self.loader:",
                "            yield b",
                "dist.init_process_group('nccl')",
                "ds = ToyDataset(64)",
                "loader = DataLoader(ds, batch_size=4, sampler=DistributedSampler(ds))",
                "model = DDP(ToyNet())",
                "opt = torch.optim.SGD(model.parameters(), lr=0.1)",
                "for epoch in range(3):",
                "    for batch in OnDevice(loader):",
                "        model(batch['x']).mean().backward()",
                "        opt.step()",
                "        opt.zero_grad()",
            ]
        )
        + "\n",
        encoding="utf-8",
    )
    result = scan_file(script, strict=True)
    assert result.value("calls_set_epoch") is False


def test_loader_without_identity_is_read(tmp_path: Path) -> None:
    # deepspeed.initialize(training_data=...) returns a DataLoader the scan has no object for
    script = tmp_path / "ds_loader.py"
    script.write_text(
        "\n".join(
            [
                "import deepspeed",
                "import torch",
                "model = torch.nn.Linear(4, 1)",
                "ds = torch.utils.data.TensorDataset(torch.randn(64, 4))",
                "engine, opt, loader, _ = deepspeed.initialize(",
                "    model=model, model_parameters=model.parameters(), training_data=ds)",
                "for epoch in range(2):",
                "    for (x,) in loader:",
                "        loss = engine(x).mean()",
                "        engine.backward(loss)",
                "        engine.step()",
            ]
        )
        + "\n",
        encoding="utf-8",
    )
    result = scan_file(script, strict=True)
    assert result.value("hand_written_loop") is not None

"""A loss logged through a metrics dict that a training step returns and the caller logs by
name (``tracking.log(data=metrics)``), as verl-style trainers do: the scanner reads the dict's
keys, since the log call's own text never says 'loss'."""

from __future__ import annotations

from pathlib import Path

from ddpadvisor.scan import scan_file

HEAD = """\
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


class Trainer:
    def __init__(self, model, optimizer, loader):
        self.model = model
        self.optimizer = optimizer
        self.loader = loader

    def fit(self, tracking):
        for epoch in range(4):
            for batch in self.loader:
                metrics = self.training_step(batch)
                if dist.get_rank() == 0:
                    tracking.log(data=metrics, step=epoch)

"""
TAIL = """

def main(tracking):
    dist.init_process_group("gloo")
    model = DDP(torch.nn.Linear(4, 4))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(torch.randn(64, 4), torch.randn(64, 4)),
        batch_size=16,
        sampler=torch.utils.data.distributed.DistributedSampler(range(64)),
    )
    Trainer(model, optimizer, loader).fit(tracking)


if __name__ == "__main__":
    main(None)
"""

SCALED = """\
    def training_step(self, batch):
        self.optimizer.zero_grad()
        x, y = batch
        micro_batches = list(zip(x.split(4), y.split(4)))
        n_micro_batches = len(micro_batches)
        for mx, my in micro_batches:
            loss = torch.nn.functional.mse_loss(self.model(mx), my) / n_micro_batches
            loss.backward()
        self.optimizer.step()
        return {"train/loss": loss.detach().item()}
"""

# one optimizer step without accumulation; the two cases below differ in what they return
PLAIN_STEP = """\
    def training_step(self, batch):
        self.optimizer.zero_grad()
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.model(x), y)
        loss.backward()
        self.optimizer.step()
"""

AVERAGED = (
    PLAIN_STEP
    + """\
        reported = loss.detach().clone()
        dist.all_reduce(reported, op=dist.ReduceOp.AVG)
        return {"train/loss": reported.item()}
"""
)

NO_LOSS = (
    PLAIN_STEP
    + """\
        return {"grad_steps": 1, "out_mean": self.model(x).mean().item()}
"""
)


def _scan(tmp_path: Path, step: str) -> dict[str, object]:
    script = tmp_path / "trainer.py"
    script.write_text(HEAD + step + TAIL, encoding="utf-8")
    result = scan_file(script, strict=True)
    return {f: result.value(f) for f in ("logs_rank0_only", "logged_loss_reduction_wrong")}


def test_a_returned_loss_still_divided_for_accumulation_is_read_as_logged(tmp_path: Path) -> None:
    got = _scan(tmp_path, SCALED)
    assert got == {"logs_rank0_only": True, "logged_loss_reduction_wrong": True}


def test_a_returned_loss_averaged_across_ranks_is_read_as_reduced(tmp_path: Path) -> None:
    got = _scan(tmp_path, AVERAGED)
    assert got["logs_rank0_only"] is False
    assert got["logged_loss_reduction_wrong"] is not True


def test_a_logged_dict_without_a_loss_says_nothing_of_loss_logging(tmp_path: Path) -> None:
    assert _scan(tmp_path, NO_LOSS) == {
        "logs_rank0_only": None,
        "logged_loss_reduction_wrong": None,
    }

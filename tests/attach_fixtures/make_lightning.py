"""Writes Lightning ``metrics.csv`` files (CSVLogger, the real library) the attach tests read.

    python tests/attach_fixtures/make_lightning.py OUT_DIR [no-sampler | sampler]

A linear regression on fixed synthetic data, logged every step (``train_loss``, ``lr``):
``falls`` (a well-set learning rate), ``spikes`` (a few batches of the data carry targets 8x
larger: the loss jumps at those steps and comes back), ``plateau`` (a learning rate of 1e-7:
nothing is learned), ``oscillates`` (SGD at a learning rate of 0.4, near the stability limit (0.5 blows up),
so the loss swings around its level). ``no-sampler``: the ``falls`` job under 2-process DDP
on the CPU with ``use_distributed_sampler=False``, so every rank reads the whole data set and an
epoch keeps the single-process step count; ``sampler``: the same with Lightning's default
DistributedSampler (an epoch takes half the steps).
"""

from __future__ import annotations

import sys
from pathlib import Path

import lightning as L
import torch
from lightning.pytorch.loggers import CSVLogger
from torch.utils.data import DataLoader, TensorDataset


class Regression(L.LightningModule):
    def __init__(self, lr: float) -> None:
        super().__init__()
        self.lr = lr
        self.layer = torch.nn.Linear(8, 1)

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], idx: int) -> torch.Tensor:
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.layer(x), y)
        self.log("train_loss", loss, on_step=True, on_epoch=False)
        self.log("lr", self.trainer.optimizers[0].param_groups[0]["lr"], on_step=True)
        return loss

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=self.lr)


def data(spiky: bool) -> TensorDataset:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(1600, 8, generator=g)
    w = torch.randn(8, 1, generator=g)
    y = x @ w + 0.3 * torch.randn(1600, 1, generator=g)
    if spiky:
        for b in (60, 130, 170):  # three batches of 8 with targets 8x larger
            y[b * 8 : (b + 1) * 8] *= 8
    return TensorDataset(x, y)


def run(out: Path, name: str, lr: float, spiky: bool = False, **trainer: object) -> None:
    torch.manual_seed(0)
    loader = DataLoader(data(spiky), batch_size=8, shuffle=False)
    logger = CSVLogger(str(out), name=name, version=0)
    trainer.setdefault("max_epochs", 1)
    t = L.Trainer(
        logger=logger,
        log_every_n_steps=1,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        **trainer,  # type: ignore[arg-type]
    )
    t.fit(Regression(lr), loader)


if __name__ == "__main__":
    target = Path(sys.argv[1])
    if sys.argv[2:] == ["no-sampler"]:
        run(
            target,
            "no_sampler",
            0.05,
            accelerator="cpu",
            devices=2,
            strategy="ddp",
            use_distributed_sampler=False,
            max_epochs=2,
        )
    elif sys.argv[2:] == ["sampler"]:
        run(target, "sampler", 0.05, accelerator="cpu", devices=2, strategy="ddp", max_epochs=2)
    else:
        run(target, "falls", 0.05, accelerator="cpu", devices=1)
        run(target, "spikes", 0.05, spiky=True, accelerator="cpu", devices=1)
        run(target, "plateau", 1e-7, accelerator="cpu", devices=1)
        run(target, "oscillates", 0.4, accelerator="cpu", devices=1)
        run(target, "two_epochs", 0.05, accelerator="cpu", devices=1, max_epochs=2)

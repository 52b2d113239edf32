"""Train a tiny MLP with Lightning DDP, the loss multiplied by the number of processes.

Launched with ``torchrun --nproc_per_node 2 loss_times_world_size.py``. Fault: the loss is
multiplied by the world size "because DDP averages the gradients"; DDP's average is already the
gradient of the global mean loss, so every SGD update is world_size times too large. It
accumulates 4 batches: Lightning divides the loss by them, so the trace sees the factor
world_size / 4 (with world_size = accumulation = 2 it could not tell this from a missing
division).
"""

import argparse

import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Classifier(L.LightningModule):
    def __init__(self, lr: float = 0.05) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 2))
        self.loss_fn = nn.CrossEntropyLoss()

    def training_step(
        self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int
    ) -> torch.Tensor:
        x, y = batch
        # DDP averages gradients over the processes: undo it to get the sum over all samples
        loss = self.loss_fn(self.net(x), y) * self.trainer.world_size
        self.log("train_loss", loss, sync_dist=True)
        return loss

    def configure_optimizers(self):  # type: ignore[no-untyped-def]
        optimizer = torch.optim.SGD(self.parameters(), lr=self.hparams.lr, momentum=0.9)
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / 4))
        return {
            "optimizer": optimizer,
            "lr_scheduler": {"scheduler": scheduler, "interval": "step"},
        }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--max-steps", type=int, default=8)
    parser.add_argument("--precision", default="32-true")
    args = parser.parse_args()

    L.seed_everything(42)
    x = torch.randn(256, 16)
    y = (x[:, 0] > 0).long()
    loader = DataLoader(TensorDataset(x, y), batch_size=8, shuffle=True)

    trainer = L.Trainer(
        accelerator="cpu",
        devices=2,
        num_nodes=1,
        strategy="ddp",
        max_steps=args.max_steps,
        accumulate_grad_batches=4,
        gradient_clip_val=1.0,
        precision=args.precision,
        enable_checkpointing=False,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(Classifier(), train_dataloaders=loader)


if __name__ == "__main__":
    main()

"""Train a tiny MLP classifier with Lightning on 2 CPU processes (DDP).

Launched with ``torchrun --nproc_per_node 2 correct_trainer.py``: Lightning reads the torchrun
environment. Correct: the Trainer accumulates 2 batches per optimizer step, clips the gradient
norm, swaps in a DistributedSampler and sets its epoch, and steps the scheduler per optimizer
step (interval="step").
"""

import argparse

import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Classifier(L.LightningModule):
    def __init__(self, lr: float = 1e-3) -> None:  # fault loss_times_world_size: def __init__(self, lr: float = 0.05) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 2))
        self.loss_fn = nn.CrossEntropyLoss()

    def training_step(
        self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int
    ) -> torch.Tensor:
        x, y = batch
        loss = self.loss_fn(self.net(x), y)  # fault loss_times_world_size: loss = self.loss_fn(self.net(x), y) * self.trainer.world_size
        self.log("train_loss", loss, sync_dist=True)
        return loss  # fault weights_changed_rank0: = || <def on_train_start(self) -> None: || if self.global_rank == 0: || >torch.manual_seed(1234) || >warm = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 2)) || >self.net.load_state_dict(warm.state_dict())

    def configure_optimizers(self):  # type: ignore[no-untyped-def]
        optimizer = torch.optim.AdamW(self.parameters(), lr=self.hparams.lr)  # fault loss_times_world_size: optimizer = torch.optim.SGD(self.parameters(), lr=self.hparams.lr, momentum=0.9)
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
        accumulate_grad_batches=2,  # fault loss_times_world_size: accumulate_grad_batches=4,
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

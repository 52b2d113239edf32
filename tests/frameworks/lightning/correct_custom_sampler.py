"""Train a tiny MLP with Lightning DDP in bf16 mixed precision and a sampler of one's own.

Launched with ``torchrun --nproc_per_node 2 correct_custom_sampler.py``. Correct: with
use_distributed_sampler=False the module's train_dataloader builds its own DistributedSampler;
it never calls set_epoch, which is fine because Lightning's fit loop sets the epoch of every
sampler that has set_epoch. precision="bf16-mixed" runs the forward under CPU autocast.
"""

import argparse

import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


class Classifier(L.LightningModule):
    def __init__(self, lr: float = 1e-3) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 2))
        self.loss_fn = nn.CrossEntropyLoss()

    def training_step(
        self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int
    ) -> torch.Tensor:
        x, y = batch
        loss = self.loss_fn(self.net(x), y)
        self.log("train_loss", loss, sync_dist=True)
        return loss

    def train_dataloader(self) -> DataLoader:
        g = torch.Generator().manual_seed(0)
        x = torch.randn(64, 16, generator=g)
        y = (x[:, 0] > 0).long()
        dataset = TensorDataset(x, y)
        sampler = DistributedSampler(
            dataset, num_replicas=self.trainer.world_size, rank=self.global_rank, shuffle=True
        )
        return DataLoader(dataset, batch_size=8, sampler=sampler)

    def configure_optimizers(self):  # type: ignore[no-untyped-def]
        optimizer = torch.optim.AdamW(self.parameters(), lr=self.hparams.lr)
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / 4))
        return {
            "optimizer": optimizer,
            "lr_scheduler": {"scheduler": scheduler, "interval": "step"},
        }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--max-steps", type=int, default=8)
    parser.add_argument("--precision", default="bf16-mixed")
    args = parser.parse_args()

    L.seed_everything(42)
    trainer = L.Trainer(
        accelerator="cpu",
        devices=2,
        num_nodes=1,
        strategy="ddp",
        max_steps=args.max_steps,
        accumulate_grad_batches=2,
        gradient_clip_val=1.0,
        precision=args.precision,
        enable_checkpointing=False,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        use_distributed_sampler=False,  # the module builds its own DistributedSampler
    )
    trainer.fit(Classifier())


if __name__ == "__main__":
    main()

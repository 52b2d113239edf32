# Lightning classifier on an imbalanced toy set. Classes are rebalanced with a
# WeightedRandomSampler; Lightning's own sampler replacement is switched off so that the
# weighted sampler is kept.
import gc

import lightning as L
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset, WeightedRandomSampler


class Classifier(L.LightningModule):
    def __init__(self, n_in=12, n_classes=3):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(n_in, 48), nn.ReLU(), nn.Linear(48, n_classes))

    def training_step(self, batch, batch_idx):
        x, y = batch
        logits = self.body(x)
        loss = F.cross_entropy(logits, y)
        acc = (logits.argmax(-1) == y).float().mean()
        self.log_dict({"loss": loss, "acc": acc}, prog_bar=False)
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1, momentum=0.9)


def imbalanced_loader(batch_size=16):
    g = torch.Generator().manual_seed(3)
    y = torch.cat([torch.zeros(150), torch.ones(30), torch.full((20,), 2.0)]).long()
    x = torch.randn(len(y), 12, generator=g) + y[:, None].float()
    counts = torch.bincount(y).float()
    weights = (1.0 / counts)[y]
    sampler = WeightedRandomSampler(weights, num_samples=len(y), replacement=True)
    return DataLoader(TensorDataset(x, y), batch_size=batch_size, sampler=sampler)


if __name__ == "__main__":
    L.seed_everything(2024)
    model = Classifier()
    trainer = L.Trainer(
        accelerator="cpu",
        devices=2,
        strategy="ddp",
        max_steps=6,
        use_distributed_sampler=False,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(model, train_dataloaders=imbalanced_loader())
    del trainer, model
    gc.collect()
    if dist.is_initialized():
        dist.destroy_process_group()

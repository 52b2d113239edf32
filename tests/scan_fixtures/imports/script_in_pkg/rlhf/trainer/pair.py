import torch.nn as nn

from ..vendor.hf_trainer import MiniTrainer


class PolicyNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.head = nn.Linear(32, 1)

    def forward(self, x):
        return self.head(x)


class PairTrainer(MiniTrainer):
    def __init__(self, strategy, loss_fn, lr):
        super().__init__(PolicyNet(), lr)
        self.strategy = strategy
        self.loss_fn = loss_fn

    def compute_loss(self, batch):
        chosen = self.model(batch["chosen"])
        rejected = self.model(batch["rejected"])
        loss = self.loss_fn(chosen, rejected)
        return loss * self.strategy.world_size  # expect: loss-scaled-by-world-size

    def log_loss(self, loss):
        self.strategy.print_reduced("train/loss", loss)  # ok: rank0-only-loss-logging

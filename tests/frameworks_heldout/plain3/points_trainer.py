"""A small Trainer for DDP jobs (imported by points_compiled.py; not a case of its own).

It owns the epoch loop: the sampler's epoch, the optimizer step with clipping, a per-epoch
scheduler, a validation pass whose sums are all-reduced, and logging from rank 0 of values
already reduced over the ranks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import DataLoader, DistributedSampler

Batch = tuple[torch.Tensor, torch.Tensor, torch.Tensor]


@dataclass
class TrainerConfig:
    epochs: int = 3
    clip_norm: float = 2.0
    log_every: int = 5


class Trainer:
    def __init__(
        self,
        model: Callable[..., torch.Tensor],
        params: Iterable[nn.Parameter],
        optimizer: torch.optim.Optimizer,
        scheduler: torch.optim.lr_scheduler.LRScheduler,
        train_loader: DataLoader,
        train_sampler: DistributedSampler,
        val_loader: DataLoader,
        config: TrainerConfig,
    ) -> None:
        self.model = model
        self.params = list(params)
        self.opt = optimizer
        self.sched = scheduler
        self.train_loader = train_loader
        self.train_sampler = train_sampler
        self.val_loader = val_loader
        self.cfg = config
        self.rank = dist.get_rank()
        self.step = 0
        self.loss_fn = nn.CrossEntropyLoss()

    def log(self, msg: str) -> None:
        if self.rank == 0:
            print(msg, flush=True)

    def train_epoch(self, epoch: int) -> float:
        self.train_sampler.set_epoch(epoch)
        sums = torch.zeros(2)
        window = torch.zeros(2)
        for points, mask, label in self.train_loader:
            logits = self.model(points, mask)
            loss = self.loss_fn(logits, label)
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self.params, self.cfg.clip_norm)
            self.opt.step()
            self.step += 1
            item = torch.tensor([loss.item() * len(label), float(len(label))])
            sums += item
            window += item
            if self.step % self.cfg.log_every == 0:
                dist.all_reduce(window)
                self.log(f"step {self.step} loss {window[0].item() / window[1].item():.4f}")
                window.zero_()
        self.sched.step()
        dist.all_reduce(sums)
        return sums[0].item() / sums[1].item()

    @torch.no_grad()
    def evaluate(self) -> tuple[float, float]:
        sums = torch.zeros(3)
        for points, mask, label in self.val_loader:
            logits = self.model(points, mask)
            loss = nn.functional.cross_entropy(logits, label, reduction="sum")
            sums += torch.tensor(
                [loss.item(), (logits.argmax(1) == label).sum().item(), len(label)]
            )
        dist.all_reduce(sums)
        return sums[0].item() / sums[2].item(), sums[1].item() / sums[2].item()

    def fit(self, set_mode: Callable[[bool], object]) -> None:
        for epoch in range(self.cfg.epochs):
            set_mode(True)
            train_loss = self.train_epoch(epoch)
            set_mode(False)
            val_loss, val_acc = self.evaluate()
            self.log(
                f"epoch {epoch} train {train_loss:.4f} val {val_loss:.4f} acc {val_acc:.3f} "
                f"lr {self.sched.get_last_lr()[0]:.3e}"
            )

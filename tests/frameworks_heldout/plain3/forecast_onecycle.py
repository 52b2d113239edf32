"""Multi-horizon forecaster on synthetic seasonal series, trained with DDP.

Every input window is normalised by its own mean and scale (and the forecast mapped back), a
dilated 1-D conv encoder feeds a linear head, SGD with Nesterov momentum follows OneCycleLR
over the run's optimizer updates, and two micro-batches make one update (the first under
no_sync).

Launch: torchrun --nproc_per_node 2 forecast_onecycle.py
"""

from __future__ import annotations

import gc
import itertools
import math

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset, DistributedSampler

LOOKBACK = 48
HORIZON = 12


def make_series(n_series: int, length: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    t = torch.arange(length, dtype=torch.float32)
    period = torch.randint(12, 30, (n_series, 1), generator=g).float()
    phase = torch.rand(n_series, 1, generator=g) * 2 * math.pi
    level = torch.randn(n_series, 1, generator=g) * 5
    trend = torch.randn(n_series, 1, generator=g) * 0.01
    amp = 0.5 + torch.rand(n_series, 1, generator=g) * 2
    noise = 0.1 * torch.randn(n_series, length, generator=g)
    return level + trend * t + amp * torch.sin(2 * math.pi * t / period + phase) + noise


class Windows(Dataset):
    def __init__(self, series: torch.Tensor, stride: int) -> None:
        self.series = series
        span = LOOKBACK + HORIZON
        self.index = [
            (s, start)
            for s in range(series.shape[0])
            for start in range(0, series.shape[1] - span + 1, stride)
        ]

    def __len__(self) -> int:
        return len(self.index)

    def __getitem__(self, i: int):
        s, start = self.index[i]
        w = self.series[s, start : start + LOOKBACK + HORIZON]
        return w[:LOOKBACK], w[LOOKBACK:]


class WindowNorm(nn.Module):
    """Normalises each input window by its own statistics and undoes it on the forecast."""

    def __init__(self, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.affine_w = nn.Parameter(torch.ones(1))
        self.affine_b = nn.Parameter(torch.zeros(1))

    def normalise(self, x: torch.Tensor):
        mu = x.mean(dim=1, keepdim=True)
        sd = x.std(dim=1, keepdim=True) + self.eps
        return (x - mu) / sd * self.affine_w + self.affine_b, (mu, sd)

    def restore(self, y: torch.Tensor, stats) -> torch.Tensor:
        mu, sd = stats
        return (y - self.affine_b) / (self.affine_w + self.eps) * sd + mu


class Forecaster(nn.Module):
    def __init__(self, ch: int = 32) -> None:
        super().__init__()
        self.norm = WindowNorm()
        layers: list[nn.Module] = [nn.Conv1d(1, ch, 3, padding=1), nn.GELU()]
        for d in (2, 4, 8):
            layers += [nn.Conv1d(ch, ch, 3, padding=d, dilation=d), nn.GELU()]
        self.encoder = nn.Sequential(*layers)
        self.head = nn.Linear(ch * LOOKBACK, HORIZON)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z, stats = self.norm.normalise(x)
        h = self.encoder(z[:, None, :]).flatten(1)
        return self.norm.restore(self.head(h), stats)


def main() -> None:
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(1)
    torch.manual_seed(0)

    series = make_series(48, 260, seed=21)
    cut = 200
    train_set = Windows(series[:, :cut], stride=6)
    val_set = Windows(series[:, cut - LOOKBACK :], stride=HORIZON)
    batch, accum, epochs = 24, 2, 3
    train_sampler = DistributedSampler(train_set, shuffle=True, seed=1, drop_last=True)
    val_sampler = DistributedSampler(val_set, shuffle=False, drop_last=False)
    train_loader = DataLoader(train_set, batch_size=batch, sampler=train_sampler, drop_last=True)
    val_loader = DataLoader(val_set, batch_size=64, sampler=val_sampler)

    model = DDP(Forecaster())
    opt = torch.optim.SGD(
        model.parameters(), lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-4
    )
    updates_per_epoch = len(train_loader) // accum
    total_steps = epochs * updates_per_epoch  # fmt: skip  # fault forecast_sched_len_dataset: total_steps = epochs * len(train_set) // batch
    sched = torch.optim.lr_scheduler.OneCycleLR(
        opt, max_lr=0.5, total_steps=total_steps, pct_start=0.3
    )
    if rank == 0:
        print(
            f"{len(train_set)} windows over {world} ranks, {updates_per_epoch} updates per epoch, {total_steps} in all",
            flush=True,
        )

    for epoch in range(epochs):
        train_sampler.set_epoch(epoch)
        model.train()
        running = torch.zeros(2)
        micro = itertools.islice(train_loader, updates_per_epoch * accum)
        for i, (x, y) in enumerate(micro):
            last = (i + 1) % accum == 0
            if last:
                loss = F.smooth_l1_loss(model(x), y)
                (loss / accum).backward()  # fmt: skip  # fault forecast_accum_unscaled: loss.backward()  # fault forecast_loss_over_world: (loss / accum / world).backward()
            else:
                with model.no_sync():
                    loss = F.smooth_l1_loss(model(x), y)
                    (loss / accum).backward()  # fmt: skip  # fault forecast_accum_unscaled: loss.backward()  # fault forecast_loss_over_world: (loss / accum / world).backward()
            running += torch.tensor([loss.item(), 1.0])
            if last:
                torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
                opt.step()
                opt.zero_grad(set_to_none=True)
                sched.step()
        dist.all_reduce(running)

        model.eval()
        err = torch.zeros(2)
        with torch.no_grad():
            for x, y in val_loader:
                err += torch.tensor([(model(x) - y).abs().sum().item(), float(y.numel())])
        dist.all_reduce(err)
        if rank == 0:
            print(
                f"epoch {epoch} train loss {running[0].item() / running[1].item():.4f} "
                f"val MAE {err[0].item() / err[1].item():.4f} lr {sched.get_last_lr()[0]:.2e}",
                flush=True,
            )

    del model
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

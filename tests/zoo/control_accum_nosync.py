"""Gradient accumulation done by the book: no_sync on all but the last micro-batch."""

import contextlib
import gc

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.optim.lr_scheduler import OneCycleLR
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

ACCUM = 4


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(3)
    x = torch.randn(512, 16, generator=g)
    y = torch.sin(x[:, :4]).sum(1, keepdim=True)
    ds = TensorDataset(x, y)
    sampler = DistributedSampler(ds, drop_last=True)
    loader = DataLoader(ds, batch_size=8, sampler=sampler, drop_last=True)
    model = DDP(nn.Sequential(nn.Linear(16, 64), nn.SiLU(), nn.Linear(64, 1)))
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3)
    epochs = 2
    sched = OneCycleLR(opt, max_lr=2e-3, total_steps=epochs * len(loader) // ACCUM)
    loss_fn = nn.MSELoss()
    # an averaged copy of the weights, pooled across ranks once per epoch (as timm pools
    # BatchNorm statistics): large all-reduces that carry no gradient
    ema = [p.detach().clone() for p in model.parameters()]
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        running = torch.zeros(())
        for i, (xb, yb) in enumerate(loader):
            boundary = (i + 1) % ACCUM == 0
            with contextlib.nullcontext() if boundary else model.no_sync():
                loss = loss_fn(model(xb), yb) / ACCUM
                loss.backward()
            running += loss.detach()
            if boundary:
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
                sched.step()
                opt.zero_grad()
                with torch.no_grad():
                    for avg, p in zip(ema, model.parameters()):
                        avg.lerp_(p, 0.1)
        for avg in ema:
            dist.all_reduce(avg)
            avg /= dist.get_world_size()
        dist.all_reduce(running)
        if rank == 0:
            print(
                f"epoch {epoch}: mean loss {running.item() / dist.get_world_size() / (len(loader) / ACCUM):.4f}"
            )
    del model
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

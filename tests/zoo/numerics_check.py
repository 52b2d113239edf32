"""A loop that touches every path the trace agent hooks; writes its final state.

Dropout and augmentation draw from the global RNG, BatchNorm buffers are broadcast, gradients
are accumulated with no_sync, fp16 autocast runs with a GradScaler (unscale, clip), the LR
follows a scheduler and the sampler is re-seeded every epoch. Rank R saves its parameters,
buffers, optimizer and scaler state to $NUMERICS_OUT/rank<R>.pt.
"""

import contextlib
import gc
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler


class Noisy(Dataset):
    def __init__(self, n=192):
        g = torch.Generator().manual_seed(5)
        self.x = torch.randn(n, 12, generator=g)
        self.y = (self.x[:, :3].sum(1) > 0).long()

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i] + 0.05 * torch.randn(12), self.y[i]


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(3 + rank)
    ds = Noisy()
    sampler = DistributedSampler(ds, shuffle=True)
    loader = DataLoader(ds, batch_size=8, sampler=sampler)
    net = nn.Sequential(nn.Linear(12, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Dropout(0.2), nn.Linear(32, 2))
    model = DDP(net)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 4))
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**10)
    accum = 2
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for i, (xb, yb) in enumerate(loader):
            last = (i + 1) % accum == 0
            with contextlib.nullcontext() if last else model.no_sync():
                with torch.autocast("cpu", dtype=torch.float16):
                    loss = F.cross_entropy(model(xb).float(), yb) / accum
                scaler.scale(loss).backward()
            if last:
                scaler.unscale_(opt)
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                scaler.step(opt)
                scaler.update()
                sched.step()
                opt.zero_grad()
    state = {
        "model": {k: v.clone() for k, v in model.module.state_dict().items()},
        "optim": opt.state_dict(),
        "scaler": scaler.state_dict(),
        "rng": torch.get_rng_state(),
    }
    torch.save(state, os.path.join(os.environ["NUMERICS_OUT"], f"rank{rank}.pt"))
    del model
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

"""A small classifier compiled for speed (the eager backend here, inductor on a real GPU job),
trained with AdamW on a sharded synthetic dataset."""

import gc

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def main():
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 3)))
    fast = torch.compile(model.module, backend="eager")  # fix: fast = torch.compile(model, backend="eager")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(256, 8, generator=g)
    ds = TensorDataset(x, (x[:, 0] > 0).long() + (x[:, 1] > 0).long())
    sampler = DistributedSampler(ds)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for xb, yb in DataLoader(ds, batch_size=16, sampler=sampler):
            loss = nn.functional.cross_entropy(fast(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
    del model, fast
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

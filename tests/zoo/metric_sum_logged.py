"""Regression MLP with Adam; every 10 steps the mean training MSE since the last report is
all-reduced and printed from rank 0."""

import gc

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    world = dist.get_world_size()
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(3)
    x = torch.randn(320, 6, generator=g)
    y = x @ torch.randn(6, 1, generator=g) + 0.3 * torch.randn(320, 1, generator=g)
    ds = TensorDataset(x, y)
    sampler = DistributedSampler(ds)
    loader = DataLoader(ds, batch_size=8, sampler=sampler)
    model = DDP(nn.Sequential(nn.Linear(6, 24), nn.Tanh(), nn.Linear(24, 1)))
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    seen, total = 0, torch.zeros(1)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            loss = nn.functional.mse_loss(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.detach()
            seen += 1
            if seen % 10 == 0:
                report = total / 10
                dist.all_reduce(report, op=dist.ReduceOp.SUM)  # fix: = || report /= world
                if rank == 0:
                    print(f"epoch {epoch} step {seen}: train mse {report.item():.5f} ({world} ranks)")
                total.zero_()
    del model
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

"""Tabular regression with SGD + momentum and a cosine learning-rate decay over the run's
epochs; three epochs over a DistributedSampler."""

import gc

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

EPOCHS = 3


def main():
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(11)
    x = torch.randn(256, 8, generator=g)
    y = x[:, :3].sum(dim=1, keepdim=True) + 0.1 * torch.randn(256, 1, generator=g)
    ds = TensorDataset(x, y)
    sampler = DistributedSampler(ds)
    loader = DataLoader(ds, batch_size=16, sampler=sampler)
    model = DDP(nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=EPOCHS)
    for epoch in range(EPOCHS):
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            loss = nn.functional.mse_loss(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()  # fix: <=
    del model
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

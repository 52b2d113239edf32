"""Shared tiny DDP loop for the failure-mode scripts: calls ``fault(step)`` before each step."""

import gc

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def train(fault, steps=12):
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(steps * 16, 8, generator=g)
    y = x.sum(1, keepdim=True)
    ds = TensorDataset(x, y)
    sampler = DistributedSampler(ds)
    loader = DataLoader(ds, batch_size=8, sampler=sampler)
    model = DDP(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step, (xb, yb) in enumerate(loader, start=1):
        fault(step, dist.get_rank())
        opt.zero_grad()
        F.mse_loss(model(xb), yb).backward()
        opt.step()
    del model
    gc.collect()
    dist.destroy_process_group()

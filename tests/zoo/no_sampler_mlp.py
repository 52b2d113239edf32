"""Regression MLP on a synthetic tabular dataset, trained with DDP."""

import argparse
import gc

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset  # fix: = || from torch.utils.data.distributed import DistributedSampler

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--lr", type=float, default=3e-3)
args = parser.parse_args()

dist.init_process_group("gloo")
rank = dist.get_rank()
world_size = dist.get_world_size()
torch.manual_seed(42)

g = torch.Generator().manual_seed(0)
features = torch.randn(384, 20, generator=g)
w_true = torch.randn(20, 1, generator=g)
targets = features @ w_true + 0.1 * torch.randn(384, 1, generator=g)
dataset = TensorDataset(features, targets)
loader = DataLoader(dataset, batch_size=args.batch_size, shuffle=True)  # fix: sampler = DistributedSampler(dataset, shuffle=True) || loader = DataLoader(dataset, batch_size=args.batch_size, sampler=sampler)

model = nn.Sequential(nn.Linear(20, 64), nn.GELU(), nn.Linear(64, 1))
model = DDP(model)
optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)

for epoch in range(args.epochs):  # fix: = || >sampler.set_epoch(epoch)
    total = torch.zeros(2)
    for x, y in loader:
        optimizer.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        total += torch.stack([loss.detach(), torch.tensor(1.0)])
    dist.all_reduce(total)
    if rank == 0:
        print(f"epoch {epoch}: loss {total[0].item() / total[1].item():.4f}")

del model
gc.collect()
dist.destroy_process_group()

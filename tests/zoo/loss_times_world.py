"""Regression with a Huber loss; tuned on one GPU, now run on several."""

import argparse
import gc

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

parser = argparse.ArgumentParser()
parser.add_argument("--lr", type=float, default=0.01)
parser.add_argument("--epochs", type=int, default=3)
args = parser.parse_args()

dist.init_process_group("gloo")
world_size = dist.get_world_size()
rank = dist.get_rank()
torch.manual_seed(3)

g = torch.Generator().manual_seed(23)
X = torch.randn(384, 8, generator=g)
Y = X @ torch.randn(8, 2, generator=g) + 0.1 * torch.randn(384, 2, generator=g)
dataset = TensorDataset(X, Y)
sampler = DistributedSampler(dataset, shuffle=True)
loader = DataLoader(dataset, batch_size=16, sampler=sampler)

model = DDP(nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 2)))
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
criterion = nn.HuberLoss()

for epoch in range(args.epochs):
    sampler.set_epoch(epoch)
    for xb, yb in loader:
        optimizer.zero_grad()
        loss = criterion(model(xb), yb) * world_size  # fix: loss = criterion(model(xb), yb)
        loss.backward()
        optimizer.step()
    logged = loss.detach() / world_size  # fix: logged = loss.detach()
    dist.all_reduce(logged)
    if rank == 0:
        print(f"epoch {epoch}: {logged.item() / world_size:.4f}")

del model
gc.collect()
dist.destroy_process_group()

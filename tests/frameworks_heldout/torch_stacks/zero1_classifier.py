# DDP + ZeroRedundancyOptimizer (ZeRO-1: optimizer state sharded across ranks).
import argparse
import gc
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--lr", type=float, default=1e-3)
opts = parser.parse_args()

local_rank = int(os.environ["LOCAL_RANK"])
dist.init_process_group(backend="gloo")
world = dist.get_world_size()

torch.manual_seed(42)
net = nn.Sequential(
    nn.Linear(20, 64),
    nn.LayerNorm(64),
    nn.ReLU(),
    nn.Dropout(0.1),
    nn.Linear(64, 64),
    nn.ReLU(),
    nn.Linear(64, 5),
)
ddp_net = DDP(net)
optimizer = ZeroRedundancyOptimizer(
    ddp_net.parameters(), optimizer_class=torch.optim.Adam, lr=opts.lr
)

gen = torch.Generator().manual_seed(8)
feats = torch.randn(192, 20, generator=gen)
target = torch.randint(0, 5, (192,), generator=gen)
dataset = TensorDataset(feats, target)
sampler = DistributedSampler(dataset)
loader = DataLoader(dataset, batch_size=32, sampler=sampler)
crit = nn.CrossEntropyLoss()

for epoch in range(opts.epochs):
    sampler.set_epoch(epoch)
    ddp_net.train()
    running = 0.0
    for xb, yb in loader:
        optimizer.zero_grad()
        loss = crit(ddp_net(xb), yb)
        loss.backward()
        optimizer.step()
        running += loss.item()
    avg = torch.tensor(running / len(loader))
    dist.all_reduce(avg)
    if local_rank == 0:
        print(f"epoch {epoch} loss {avg.item() / world:.4f}")

optimizer.consolidate_state_dict(to=0)
del ddp_net, net, optimizer
gc.collect()
dist.destroy_process_group()

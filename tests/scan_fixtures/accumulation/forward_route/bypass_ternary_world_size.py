"""A forward written for both launches: ``model.module(x)`` when the world size is above 1.
That is the side that runs under DDP, so the training forward goes around the wrapper."""
# scan-facts: forward_bypasses_ddp=true
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

from _toy import ToyDataset, ToyNet

world_size = int(os.environ.get("WORLD_SIZE", "1"))
if world_size > 1:
    dist.init_process_group("nccl")
model = ToyNet().cuda()
model = DDP(model)
ds = ToyDataset(1024)
sampler = DistributedSampler(ds)
loader = DataLoader(ds, batch_size=32, sampler=sampler)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(5):
    sampler.set_epoch(epoch)
    for batch in loader:
        x = batch["x"].cuda()
        out = model.module(x) if world_size > 1 else model(x)  # expect: ddp-wrapper-bypassed
        loss = out.square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()

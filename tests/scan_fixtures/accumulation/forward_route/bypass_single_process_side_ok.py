"""Lookalikes that are not bypasses: ``model.module(x)`` only on the single-process side
(``world_size == 1``, where this script still wraps), and an evaluation pass through
``model.module`` under ``torch.no_grad()``."""
# scan-facts: forward_bypasses_ddp=false
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

from _toy import ToyDataset, ToyNet

world_size = int(os.environ.get("WORLD_SIZE", "1"))
dist.init_process_group("nccl" if world_size > 1 else "gloo")
model = DDP(ToyNet().cuda())
ds = ToyDataset(1024)
sampler = DistributedSampler(ds)
loader = DataLoader(ds, batch_size=32, sampler=sampler)
val_loader = DataLoader(ToyDataset(64), batch_size=32)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(5):
    sampler.set_epoch(epoch)
    for batch in loader:
        x = batch["x"].cuda()
        if world_size == 1:
            out = model.module(x)  # ok: ddp-wrapper-bypassed
        else:
            out = model(x)
        loss = out.square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        for batch in val_loader:
            val = model.module(batch["x"].cuda()).square().mean()  # ok: ddp-wrapper-bypassed

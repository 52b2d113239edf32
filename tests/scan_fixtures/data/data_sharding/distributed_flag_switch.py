"""A --distributed flag switches between a DDP set-up and a single-process one. The job being
diagnosed runs distributed, so the flag's distributed side is read, with no second reading."""
# scan-facts: uses_distributed_sampler=true calls_set_epoch=true forward_bypasses_ddp=false
import argparse

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

from _toy import ToyDataset, ToyNet

parser = argparse.ArgumentParser()
parser.add_argument("--distributed", action="store_true")
args = parser.parse_args()
ds = ToyDataset(512)
model = ToyNet()
if args.distributed:
    dist.init_process_group("gloo")
    model = DDP(model)
    sampler = DistributedSampler(ds)
else:
    sampler = None
loader = DataLoader(ds, batch_size=16, sampler=sampler, shuffle=sampler is None)  # ok: no-distributed-sampler
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(3):
    if sampler is not None:
        sampler.set_epoch(epoch)
    for batch in loader:
        loss = model(batch["x"]).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad()

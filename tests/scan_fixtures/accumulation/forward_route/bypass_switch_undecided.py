"""A flag the scan cannot read chooses between the wrapper and ``model.module``: the two are
alternatives, so whether the forward bypasses DDP is left undecided."""
# scan-facts: forward_bypasses_ddp=unknown
import argparse

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

from _toy import ToyDataset, ToyNet

parser = argparse.ArgumentParser()
parser.add_argument("--raw_forward", action="store_true")
args = parser.parse_args()
dist.init_process_group("nccl")
model = DDP(ToyNet().cuda())
ds = ToyDataset(1024)
sampler = DistributedSampler(ds)
loader = DataLoader(ds, batch_size=32, sampler=sampler)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(5):
    sampler.set_epoch(epoch)
    for batch in loader:
        x = batch["x"].cuda()
        out = model.module(x) if args.raw_forward else model(x)  # ok: ddp-wrapper-bypassed
        loss = out.square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()

"""A module-level switch swaps the sharded loader for a plain one. Which one runs depends on
the environment the scan cannot see: sharding must stay undecided, not be reported."""
# scan-facts: uses_distributed_sampler=unknown
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

from _toy import ToyDataset, ToyNet


def get_loader(ds):
    return DataLoader(ds, batch_size=16, sampler=DistributedSampler(ds))


def plain_loader(ds):
    return DataLoader(ds, batch_size=16, shuffle=True)  # ok: no-distributed-sampler


if os.environ.get("FAST_LOCAL_DATA") == "1":
    get_loader = plain_loader


dist.init_process_group("gloo")
loader = get_loader(ToyDataset(512))
model = DDP(ToyNet())
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for batch in loader:
    loss = model(batch["x"]).square().mean()
    loss.backward()
    opt.step()
    opt.zero_grad()

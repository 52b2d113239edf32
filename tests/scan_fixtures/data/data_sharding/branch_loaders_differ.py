"""if/else builds the loader two ways on a switch the scan cannot decide: one shards, one
does not. Neither branch may decide the fact for the other."""
# scan-facts: uses_distributed_sampler=unknown grad_accum_steps=1
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

from _toy import ToyDataset, ToyNet

dist.init_process_group("gloo")
ds = ToyDataset(512)
if os.environ.get("SHARD_DATA", "1") == "1":
    loader = DataLoader(ds, batch_size=16, sampler=DistributedSampler(ds))  # ok: no-distributed-sampler
else:
    loader = DataLoader(ds, batch_size=16, shuffle=True)  # ok: no-distributed-sampler
model = DDP(ToyNet())
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for batch in loader:
    loss = model(batch["x"]).square().mean()
    loss.backward()
    opt.step()
    opt.zero_grad()

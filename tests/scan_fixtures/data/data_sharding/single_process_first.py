"""The single-process debug path comes first and the DDP set-up in the else: the distributed
side is the one read (the wrapped model, the sharded loader), with no second reading."""
# scan-facts: forward_bypasses_ddp=false uses_distributed_sampler=true
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

from _toy import ToyDataset, ToyNet

ds = ToyDataset(512)
model = ToyNet()
if os.environ.get("LOCAL_DEBUG") == "1":
    model = model.to("cpu")
    loader = DataLoader(ds, batch_size=16, shuffle=True)  # ok: no-distributed-sampler
else:
    dist.init_process_group("gloo")
    model = DDP(model)
    loader = DataLoader(ds, batch_size=16, sampler=DistributedSampler(ds))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for batch in loader:
    loss = model(batch["x"]).square().mean()  # ok: ddp-wrapper-bypassed
    loss.backward()
    opt.step()
    opt.zero_grad()

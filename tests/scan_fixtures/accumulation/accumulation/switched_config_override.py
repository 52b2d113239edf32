"""The accumulation count comes from a project config, and an env switch sets it to 1 for a
quick run. The config module is not in the scan: 1 holds on one side only, so no count is known."""
# scan-facts: grad_accum_steps=unknown
import os

import torch
import torch.distributed as dist
from myproject.config import GRAD_ACCUM
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

from _toy import ToyDataset, ToyNet

accum = GRAD_ACCUM
if os.environ.get("QUICK_RUN") == "1":
    accum = 1

dist.init_process_group("gloo")
ds = ToyDataset(512)
loader = DataLoader(ds, batch_size=8, sampler=DistributedSampler(ds))
model = DDP(ToyNet())
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for i, batch in enumerate(loader):
    loss = model(batch["x"]).square().mean() / accum
    loss.backward()
    if (i + 1) % accum == 0:
        opt.step()
        opt.zero_grad()

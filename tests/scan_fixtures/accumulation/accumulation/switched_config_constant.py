"""The accumulation count comes from a project config under an env switch. The config module
is not in the scan, so its value is unknown: the local default must not become the fact."""
# scan-facts: grad_accum_steps=unknown loss_divided_by_accum=true
import os

import torch
import torch.distributed as dist
from myproject.config import GRAD_ACCUM
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

from _toy import ToyDataset, ToyNet

accum = 1
if os.environ.get("USE_PROJECT_CONFIG") == "1":
    accum = GRAD_ACCUM

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

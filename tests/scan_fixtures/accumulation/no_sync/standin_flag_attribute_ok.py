"""A project module that stands in for a DDP wrapper (for the evaluation copy) and defines
``require_backward_grad_sync`` as a plain attribute so the same code can set it: setting it
there skips nothing. The trained DDP model syncs every backward."""
# scan-facts: uses_no_sync=false final_micro_step_synced=true
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler

from _toy import ToyDataset, ToyNet


class LocalWrap(nn.Module):
    def __init__(self, module):
        super().__init__()
        self.module = module
        self.require_backward_grad_sync = False  # ok: no-sync-misaligned

    def forward(self, *args):
        return self.module(*args)


dist.init_process_group("nccl")
local_rank = int(os.environ["LOCAL_RANK"])
model = DDP(ToyNet().cuda(), device_ids=[local_rank])
shadow = LocalWrap(ToyNet().cuda().eval())
data = ToyDataset(512)
sampler = DistributedSampler(data)
loader = DataLoader(data, batch_size=16, sampler=sampler)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
for epoch in range(3):
    sampler.set_epoch(epoch)
    for batch in loader:
        loss = model(batch["x"].cuda()).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    with torch.no_grad():
        shadow.module.load_state_dict(model.module.state_dict())

"""The project's own gradient helper, named like torch's clip_grad_value_, clamps only when a
clip value is given; called with None it just measures the norm: no clipping. The same helper
called with a value elsewhere would clip (see own_clip_helper_value.py)."""
# scan-facts: uses_grad_clipping=false
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler

from _toy import ToyDataset, ToyNet


def clip_grad_value_(parameters, clip_value, norm_type=2):
    parameters = [p for p in parameters if p.grad is not None]
    total = 0.0
    for p in parameters:
        total += p.grad.data.norm(norm_type).item() ** norm_type
        if clip_value is not None:
            p.grad.data.clamp_(min=-clip_value, max=clip_value)
    return total ** (1.0 / norm_type)


dist.init_process_group("nccl")
local_rank = int(os.environ["LOCAL_RANK"])
model = DDP(ToyNet().cuda(), device_ids=[local_rank])
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
data = ToyDataset(512)
sampler = DistributedSampler(data)
loader = DataLoader(data, batch_size=16, sampler=sampler)
for epoch in range(3):
    sampler.set_epoch(epoch)
    for batch in loader:
        loss = model(batch["x"].cuda()).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        grad_norm = clip_grad_value_(model.parameters(), None)
        optimizer.step()  # expect: grad-clip-missing

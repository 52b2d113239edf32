"""Square-root LR scaling, the Adam-friendly rule."""
# scan-facts: lr_scaling=sqrt loss_multiplied_by_world_size=false
import math

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from _toy import ToyNet

dist.init_process_group("gloo")
ws = dist.get_world_size()
model = DDP(ToyNet())
opt = torch.optim.Adam(model.parameters(), lr=3e-4 * math.sqrt(ws))  # ok: lr-scaled-too-aggressively
for step in range(100):
    x = torch.randn(8, 16)
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()

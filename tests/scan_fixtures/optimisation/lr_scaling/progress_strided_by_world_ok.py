"""Each rank reads every world_size-th example and counts what all ranks consumed
(``consumed += world_size``); the learning rate decays with that progress fraction. The
counter strides over the ranks' examples: the rate is not scaled by the world size."""
# scan-facts: lr_scaling=unknown
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from _toy import ToyNet

dist.init_process_group("nccl")
rank, world_size = dist.get_rank(), dist.get_world_size()
local_rank = int(os.environ["LOCAL_RANK"])
rows = torch.randn(4096, 16)
model = DDP(ToyNet().cuda(), device_ids=[local_rank])
base_lr = 3e-4
optimizer = torch.optim.AdamW(model.parameters(), lr=base_lr)
consumed = rank
while consumed < len(rows):
    x = rows[consumed].unsqueeze(0).cuda()
    consumed += world_size
    progress = consumed / len(rows)
    for group in optimizer.param_groups:
        group["lr"] = base_lr * (1.0 - progress)  # ok: lr-scaled-too-aggressively
    loss = model(x).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()

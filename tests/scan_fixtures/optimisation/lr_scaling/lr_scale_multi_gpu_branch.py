"""The decided lookalike: the scaling sits under a test on the world size, which every rank
of a multi-GPU job takes; no option turns it off."""
# scan-facts: lr_scaling=linear
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

from _toy import ToyNet

dist.init_process_group("nccl")
world_size = dist.get_world_size()
lr = 0.1
if world_size > 1:
    lr = lr * world_size  # expect: lr-scaled-too-aggressively
model = DDP(ToyNet().cuda())
optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
for step in range(1000):
    x = torch.randn(32, 16, device="cuda")
    loss = F.mse_loss(model(x), x)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()

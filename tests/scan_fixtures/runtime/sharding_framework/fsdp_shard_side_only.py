"""Sharding under a test the scan cannot read, with no plain-DDP alternative on the other
side: the job being diagnosed runs distributed, and FSDP is the only way it does."""
# scan-facts: uses_fsdp_or_zero=true
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.fsdp import fully_shard

from _toy import ToyNet


class Dims:
    def __init__(self, world):
        self.world = world

    @property
    def shard_enabled(self):
        return self.world > 1


dist.init_process_group("nccl")
dims = Dims(dist.get_world_size())
model = ToyNet().cuda()
if dims.shard_enabled:
    for block in model.children():
        fully_shard(block)
    fully_shard(model)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
for step in range(1000):
    x = torch.randn(32, 16, device="cuda")
    loss = F.mse_loss(model(x), x)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()

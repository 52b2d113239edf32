"""DDP averages over the data-parallel ranks; each context-parallel rank holds a sequence
shard's share of the gradient, so summing over the context-parallel group is right."""

# scan-facts: uses_comm_hook=false comm_hook_averages=unknown
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from _toy import ToyNet

dist.init_process_group("nccl")
world = dist.get_world_size()
cp_size = 2
rank = dist.get_rank()
dp_groups = [dist.new_group(list(range(i, world, cp_size))) for i in range(cp_size)]
cp_groups = [dist.new_group(list(range(i, i + cp_size))) for i in range(0, world, cp_size)]
dp_group = dp_groups[rank % cp_size]
cp_group = cp_groups[rank // cp_size]
model = DDP(ToyNet().cuda(), process_group=dp_group)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
for step in range(100):
    loss = model(torch.randn(8, 16, device="cuda")).pow(2).mean()
    loss.backward()
    for p in model.parameters():
        dist.all_reduce(
            p.grad, op=dist.ReduceOp.SUM, group=cp_group
        )  # ok: custom-comm-hook-scaling
    opt.step()
    opt.zero_grad()

"""The gradients are summed again by hand over the data-parallel group after DDP averaged them:
W times the average."""

# scan-facts: uses_comm_hook=true comm_hook_averages=false
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from _toy import ToyNet

dist.init_process_group("nccl")
dp_group = dist.new_group(list(range(dist.get_world_size())))
model = DDP(ToyNet().cuda(), process_group=dp_group)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
for step in range(100):
    loss = model(torch.randn(8, 16, device="cuda")).pow(2).mean()
    loss.backward()
    for p in model.parameters():
        dist.all_reduce(p.grad, group=dp_group)  # expect: custom-comm-hook-scaling
    opt.step()
    opt.zero_grad()

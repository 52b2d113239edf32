"""Gradients all-reduced by hand with ReduceOp.AVG: averaged, as DDP would."""
# scan-facts: uses_comm_hook=true comm_hook_averages=true
import torch
import torch.distributed as dist

from _toy import ToyNet

dist.init_process_group("nccl")
model = ToyNet().cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(100):
    loss = model(torch.randn(8, 16, device="cuda")).pow(2).mean()
    loss.backward()
    for p in model.parameters():
        dist.all_reduce(p.grad, op=dist.ReduceOp.AVG)  # ok: custom-comm-hook-scaling
    opt.step()
    opt.zero_grad()

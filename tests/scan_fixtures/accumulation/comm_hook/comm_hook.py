"""A compression hook, plus a hand-rolled gradient all-reduce on top of DDP's own."""
# scan-facts: uses_comm_hook=true hand_written_loop=true comm_hook_averages=false
import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP

from _toy import ToyNet

dist.init_process_group("nccl")
model = DDP(ToyNet().cuda())
model.register_comm_hook(state=None, hook=default_hooks.fp16_compress_hook)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
for step in range(100):
    loss = model(torch.randn(8, 16, device="cuda")).pow(2).mean()
    loss.backward()
    for p in model.parameters():
        dist.all_reduce(p.grad)  # expect: custom-comm-hook-scaling
    opt.step()
    opt.zero_grad()

"""A hand-written rate function that takes the optimizer first and the step after it
(``adjust(opt, epoch_steps, step)``): its ramp ``min(1, step / 2000)`` is the warmup, over
2000 steps; the first parameter is not the step."""
# scan-facts: warmup_steps=2000
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from _toy import ToyNet


def adjust(opt, epoch_steps, step):
    peak = 3e-4
    for group in opt.param_groups:
        group["lr"] = peak * min(1.0, step / 2000)  # ok: warmup-too-short


dist.init_process_group("nccl")
model = DDP(ToyNet().cuda())
opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
for step in range(50000):
    adjust(opt, 500, step)
    loss = model(torch.randn(32, 16, device="cuda")).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()

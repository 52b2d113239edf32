"""A schedule written as a closure over its warmup length, called once per step; a per-layer
learning-rate table with "lr" in its name runs once at set-up and says nothing of the warmup."""

# scan-facts: warmup_steps=2000
import math

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

from _toy import ToyNet


def lr_decay_table(groups, decay):
    n = len(groups)
    return {name: decay ** (n - 1 - i) for i, name in enumerate(groups)}


def set_lr(opt, value):
    for group in opt.param_groups:
        group["lr"] = value * group.get("lr_scale", 1.0)


def cosine_with_warmup(opt, peak, warmup, total):
    def adjust(step):
        if step < warmup:
            value = peak * (step + 1) / warmup
        else:
            value = 0.5 * (1 + math.cos(math.pi * (step - warmup) / (total - warmup))) * peak
        set_lr(opt, value)

    return adjust


dist.init_process_group("nccl")
model = DDP(ToyNet().cuda())
scales = lr_decay_table(["embed", "blocks", "head"], 0.75)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
for group in optimizer.param_groups:
    group["lr"] = 1e-3 * scales["head"]
schedule = cosine_with_warmup(optimizer, 1e-3, 2000, 100_000)
for step in range(100_000):
    schedule(step)
    x = torch.randn(32, 16, device="cuda")
    loss = F.mse_loss(model(x), x)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()

"""The same closure schedule with its warmup length from a command-line option: 10000 is only
the option's default, so the warmup is not a fact."""

# scan-facts: warmup_steps=unknown
import argparse
import math

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

from _toy import ToyNet


def set_lr(opt, value):
    for group in opt.param_groups:
        group["lr"] = value


def cosine_with_warmup(opt, peak, warmup, total):
    def adjust(step):
        if step < warmup:
            value = peak * (step + 1) / warmup
        else:
            value = 0.5 * (1 + math.cos(math.pi * (step - warmup) / (total - warmup))) * peak
        set_lr(opt, value)

    return adjust


parser = argparse.ArgumentParser()
parser.add_argument("--warmup", type=int, default=10000)
args = parser.parse_args()

dist.init_process_group("nccl")
model = DDP(ToyNet().cuda())
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
schedule = cosine_with_warmup(optimizer, 1e-3, args.warmup, 100_000)
for step in range(100_000):
    schedule(step)
    x = torch.randn(32, 16, device="cuda")
    loss = F.mse_loss(model(x), x)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()

"""The schedule's function is chosen by a config key: a constant rate under one name, a ramp
over ``warmup`` steps then a cosine under another. The constant one is read first, but the run
may take the ramp, so the warmup is not decided."""
# scan-facts: warmup_steps=unknown
import math
import sys
from functools import partial

import torch
import torch.distributed as dist
import yaml
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.optim.lr_scheduler import LambdaLR

from _toy import ToyNet


def ramp_then_cosine(step, warmup, total):
    if step < warmup:
        return step / warmup
    done = (step - warmup) / max(1, total - warmup)
    return 0.5 * (1 + math.cos(math.pi * done))


def rate_function(sched):
    if sched["kind"] == "flat":
        fn = lambda step: 1.0  # noqa: E731
    elif sched["kind"] == "cosine":
        fn = partial(ramp_then_cosine, warmup=sched["warmup"], total=sched["total"])
    else:
        raise ValueError(sched["kind"])
    return fn


with open(sys.argv[1]) as f:
    config = yaml.safe_load(f)
dist.init_process_group("nccl")
model = DDP(ToyNet().cuda())
opt = torch.optim.AdamW(model.parameters(), lr=6e-4)
sched = LambdaLR(opt, rate_function(config["schedule"]))  # ok: warmup-too-short
for step in range(20000):
    loss = model(torch.randn(32, 16, device="cuda")).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    sched.step()

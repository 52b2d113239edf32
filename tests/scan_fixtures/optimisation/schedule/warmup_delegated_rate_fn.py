"""A trainer class writes the rate each iteration from a scheduler object of the project,
whose ``update_lr(it)`` hands the iteration to a function it picked by name at set-up (a
cosine, or a warmup then a cosine). Neither ``update_lr`` nor the trainer's methods around
the assignment test anything, but that does not make the schedule one without warmup: the
function ``update_lr`` calls decides."""
# scan-facts: warmup_steps=unknown
import math
import sys
from functools import partial

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from _toy import ToyNet


def cosine(base, total, it):
    return base * 0.5 * (1 + math.cos(math.pi * it / total))


def warm_cosine(base, total, warm, it):
    if it < warm:
        return base * it / warm
    return cosine(base, total - warm, it - warm)


class RateSchedule:
    def __init__(self, kind, base, total, warm):
        if kind == "cos":
            self.fn = partial(cosine, base, total)
        else:
            self.fn = partial(warm_cosine, base, total, warm)

    def update_lr(self, it):
        return self.fn(it)


class Trainer:
    def __init__(self, kind):
        dist.init_process_group("nccl")
        self.model = DDP(ToyNet().cuda())
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.1, momentum=0.9)
        self.sched = RateSchedule(kind, 0.1, 100 * 300, 5 * 300)
        self.done = 0

    def fit(self):
        for self.epoch in range(100):
            self.one_epoch()

    def one_epoch(self):
        for self.it in range(300):
            self.one_iter()

    def one_iter(self):
        loss = self.model(torch.randn(32, 16, device="cuda")).pow(2).mean()
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        self.done += 1
        lr = self.sched.update_lr(self.done)
        for group in self.opt.param_groups:
            group["lr"] = lr  # ok: warmup-too-short


Trainer(sys.argv[1]).fit()

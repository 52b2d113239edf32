"""A project optimizer wrapper that picks its autocast context and GradScaler in ``__init__``
on an option (``self.ctx = autocast(...)`` on one side, a do-nothing context on the other):
both sides are readings of the run, so neither fp32 nor fp16 AMP is stated."""
# scan-facts: precision=unknown uses_grad_scaler=unknown
import argparse
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler

from _toy import ToyDataset, ToyNet


class Passthrough:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class MixedStepper:
    def __init__(self, mode, optimizer):
        self.amp = mode > 0
        if self.amp:
            self.ctx = torch.autocast("cuda", dtype=torch.float16)
            self.scaler = torch.cuda.amp.GradScaler()
        else:
            self.ctx = Passthrough()
            self.scaler = None
        self.optimizer = optimizer

    def update(self, loss):
        if self.scaler is not None:
            self.scaler.scale(loss).backward()
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            loss.backward()
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)


parser = argparse.ArgumentParser()
parser.add_argument("--mixed", type=int, default=0)
args = parser.parse_args()
dist.init_process_group("nccl")
local_rank = int(os.environ["LOCAL_RANK"])
model = DDP(ToyNet().cuda(), device_ids=[local_rank])
stepper = MixedStepper(args.mixed, torch.optim.AdamW(model.parameters(), lr=1e-3))
data = ToyDataset(512)
sampler = DistributedSampler(data)
loader = DataLoader(data, batch_size=16, sampler=sampler)
for epoch in range(3):
    sampler.set_epoch(epoch)
    for batch in loader:
        with stepper.ctx:
            loss = model(batch["x"].cuda()).pow(2).mean()
        stepper.update(loss)

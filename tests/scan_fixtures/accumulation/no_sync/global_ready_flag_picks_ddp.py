"""A set-up helper records that the process group is up in a module global (``global _ready``
then ``_ready = True``); the wrapper class is then picked by reading it back. After the set-up
the DDP side is the one that runs, and its sync flag skips the non-final micro-steps."""
# scan-facts: uses_no_sync=true final_micro_step_synced=true
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler

from _toy import ToyDataset, ToyNet

_ready = False


def start():
    global _ready
    dist.init_process_group("nccl")
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    _ready = True


def ready():
    return _ready


class Alone(nn.Module):
    def __init__(self, module, **unused):
        super().__init__()
        self.module = module
        self.require_backward_grad_sync = True

    def forward(self, *args):
        return self.module(*args)


ACCUM = 4
start()
model = (DDP if ready() else Alone)(ToyNet().cuda(), device_ids=[int(os.environ["LOCAL_RANK"])])
data = ToyDataset(512)
sampler = DistributedSampler(data)
loader = DataLoader(data, batch_size=16, sampler=sampler)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
for epoch in range(3):
    sampler.set_epoch(epoch)
    for i, batch in enumerate(loader):
        model.require_backward_grad_sync = (i + 1) % ACCUM == 0
        loss = model(batch["x"].cuda()).pow(2).mean() / ACCUM
        loss.backward()
        if (i + 1) % ACCUM == 0:
            optimizer.step()
            optimizer.zero_grad()

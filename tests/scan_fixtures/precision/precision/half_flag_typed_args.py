"""Options declared as the annotated fields of a class over a parser base the scan does not
read (typed-argument-parser style): ``--half`` defaults to off, but the run may turn it on, so
the weights' dtype is the run's choice."""
# scan-facts: precision=unknown
import os

import torch
import torch.distributed as dist
from tap import Tap
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler

from _toy import ToyDataset, ToyNet


class Options(Tap):
    lr: float = 3e-4
    half: bool = False
    epochs: int = 4


opts = Options(explicit_bool=True).parse_args(known_only=True)
dist.init_process_group("nccl")
local_rank = int(os.environ["LOCAL_RANK"])
net = ToyNet().cuda()
if opts.half:
    net = net.half()  # ok: pure-low-precision-weights
net = DDP(net, device_ids=[local_rank])
data = ToyDataset(512)
sampler = DistributedSampler(data)
loader = DataLoader(data, batch_size=16, sampler=sampler)
optimizer = torch.optim.AdamW(net.parameters(), lr=opts.lr)
for epoch in range(opts.epochs):
    sampler.set_epoch(epoch)
    for batch in loader:
        x = batch["x"].cuda()
        if opts.half:
            x = x.half()
        loss = net(x).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

"""The bypass behind a check of the distributed mode (``is_dist_avail_and_initialized()``, as
DeiT/DETR-style utilities write it) after the process group is up: it runs under DDP."""
# scan-facts: forward_bypasses_ddp=true
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

from _toy import ToyDataset, ToyNet


def is_dist_avail_and_initialized():
    if not dist.is_available():
        return False
    return dist.is_initialized()


def forward(model, x):
    if is_dist_avail_and_initialized():
        return model.module(x)  # expect: ddp-wrapper-bypassed
    return model(x)


if not dist.is_initialized():
    dist.init_process_group("nccl")
model = DDP(ToyNet().cuda())
ds = ToyDataset(1024)
sampler = DistributedSampler(ds)
loader = DataLoader(ds, batch_size=32, sampler=sampler)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(5):
    sampler.set_epoch(epoch)
    for batch in loader:
        loss = forward(model, batch["x"].cuda()).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()

"""The forward runs under a project ``@contextmanager`` helper that always opens a bf16
autocast around its ``yield``: the ``with`` over the helper is that autocast."""

# scan-facts: precision=bf16_amp
import contextlib

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

from _toy import ToyDataset, ToyNet


@contextlib.contextmanager
def mixed_precision():
    with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
        yield


dist.init_process_group("nccl")
rank = dist.get_rank()
model = DDP(ToyNet().cuda(rank), device_ids=[rank])
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
data = ToyDataset(512)
sampler = DistributedSampler(data)
loader = DataLoader(data, batch_size=16, sampler=sampler)
for epoch in range(4):
    sampler.set_epoch(epoch)
    for batch in loader:
        x = batch["x"].cuda(rank)
        with mixed_precision():
            loss = F.mse_loss(model(x), x)
        loss.backward()
        opt.step()
        opt.zero_grad()

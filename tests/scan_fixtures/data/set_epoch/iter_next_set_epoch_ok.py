"""A fixed number of steps per epoch drawn with ``next()`` from ``iter(loader)``, re-made each
epoch after ``sampler.set_epoch(epoch)``."""
# scan-facts: calls_set_epoch=true uses_distributed_sampler=true
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

from _toy import ToyDataset, ToyNet

dist.init_process_group("nccl")
ds = ToyDataset(4096)
sampler = DistributedSampler(ds, shuffle=True)
loader = DataLoader(ds, batch_size=32, sampler=sampler, drop_last=True)
model = DDP(ToyNet().cuda())
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
steps_per_epoch = len(loader)
for epoch in range(10):  # ok: sampler-set-epoch-missing
    sampler.set_epoch(epoch)
    batches = iter(loader)
    for step in range(steps_per_epoch):
        batch = next(batches)
        loss = model(batch["x"].cuda()).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()

"""The scheduler factory gets the optimizer and keyword arguments built from the namespace;
its result is not a scheduler class the scan knows, so the warmup is not decided (and the
learning rate is not constant either)."""
# scan-facts: warmup_steps=unknown
import argparse

import torch
import torch.distributed as dist
import torch.nn.functional as F
from timm.scheduler import create_scheduler_v2, scheduler_kwargs
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

from _toy import ToyDataset, ToyNet

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=100)
parser.add_argument("--warmup-epochs", type=int, default=5)
args = parser.parse_args()

dist.init_process_group("nccl")
model = DDP(ToyNet().cuda())
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)  # ok: warmup-too-short
dataset = ToyDataset(1024)
sampler = DistributedSampler(dataset)
loader = DataLoader(dataset, batch_size=64, sampler=sampler)
lr_scheduler, num_epochs = create_scheduler_v2(
    optimizer, **scheduler_kwargs(args), updates_per_epoch=len(loader)
)
step = 0
for epoch in range(num_epochs):
    sampler.set_epoch(epoch)
    for batch in loader:
        loss = F.mse_loss(model(batch["x"]), batch["x"])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        step += 1
        lr_scheduler.step_update(num_updates=step)

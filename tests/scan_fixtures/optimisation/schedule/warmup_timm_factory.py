"""A timm-style script: the scheduler comes from a factory fed the whole namespace, warmup
epochs included (`--warmup-epochs`), so its warmup is whatever the run passes."""
# scan-facts: warmup_steps=unknown
import argparse

import torch
import torch.distributed as dist
import torch.nn.functional as F
from timm.scheduler import create_scheduler
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

from _toy import ToyDataset, ToyNet

parser = argparse.ArgumentParser()
parser.add_argument("--sched", default="cosine")
parser.add_argument("--epochs", type=int, default=300)
parser.add_argument("--warmup-epochs", type=int, default=5)
parser.add_argument("--warmup-lr", type=float, default=1e-6)
parser.add_argument("--lr", type=float, default=5e-4)
args = parser.parse_args()

dist.init_process_group("nccl")
model = DDP(ToyNet().cuda())
optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.05)
lr_scheduler, num_epochs = create_scheduler(args, optimizer)  # ok: warmup-too-short
dataset = ToyDataset(1024)
sampler = DistributedSampler(dataset)
loader = DataLoader(dataset, batch_size=64, sampler=sampler)
for epoch in range(num_epochs):
    sampler.set_epoch(epoch)
    for batch in loader:
        loss = F.mse_loss(model(batch["x"]), batch["x"])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    lr_scheduler.step(epoch + 1)

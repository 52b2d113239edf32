"""A warmup written by hand in the loop, next to a torch scheduler that takes over after it:
the ramp sets param_group["lr"] itself, so the scheduler's own (absent) warmup says nothing."""
# scan-facts: warmup_steps=unknown
import argparse

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

from _toy import ToyDataset, ToyNet

parser = argparse.ArgumentParser()
parser.add_argument("--warmup-iters", type=int, default=500)
parser.add_argument("--lr", type=float, default=3e-4)
args = parser.parse_args()

dist.init_process_group("nccl")
model = DDP(ToyNet().cuda())
optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=10000)  # ok: warmup-too-short
dataset = ToyDataset(1024)
sampler = DistributedSampler(dataset)
loader = DataLoader(dataset, batch_size=64, sampler=sampler)
it = 0
for epoch in range(20):
    sampler.set_epoch(epoch)
    for batch in loader:
        if it < args.warmup_iters:
            lr = args.lr * min(1.0, (it + 1) / args.warmup_iters)
            for group in optimizer.param_groups:
                group["lr"] = lr
        loss = F.mse_loss(model(batch["x"]), batch["x"])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if it >= args.warmup_iters:
            scheduler.step()
        it += 1

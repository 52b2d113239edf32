"""The same flag-defaulted accumulation, written right: the loss is divided by the count and
the scheduler steps with the optimizer, so both facts hold whatever count the run passes."""
# scan-facts: grad_accum_steps=unknown loss_divided_by_accum=true
# scan-facts: scheduler_steps_per_optimizer_step=1.0
import argparse

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

from _toy import ToyDataset, ToyNet

parser = argparse.ArgumentParser()
parser.add_argument("--accum_iter", type=int, default=1)
parser.add_argument("--epochs", type=int, default=10)
args = parser.parse_args()

dist.init_process_group("nccl")
model = DDP(ToyNet().cuda())
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=1000)
dataset = ToyDataset(1024)
sampler = DistributedSampler(dataset)
loader = DataLoader(dataset, batch_size=32, sampler=sampler)
for epoch in range(args.epochs):
    sampler.set_epoch(epoch)
    for step, batch in enumerate(loader):
        loss = F.mse_loss(model(batch["x"]), batch["x"])
        loss = loss / args.accum_iter
        loss.backward()  # ok: grad-accum-loss-not-scaled
        if (step + 1) % args.accum_iter == 0:
            optimizer.step()
            scheduler.step()  # ok: scheduler-step-miscounted
            optimizer.zero_grad()

"""Accumulation behind a flag that defaults to 1 (`--accum-iter`): the default is not the run's
count, so the loss is read as if the run accumulates. It is not divided by the count."""
# scan-facts: grad_accum_steps=unknown loss_divided_by_accum=false
# scan-facts: scheduler_steps_per_optimizer_step=unknown zero_grad_every_micro_step=false
import argparse

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

from _toy import ToyDataset, ToyNet


def get_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--accum-iter", type=int, default=1, help="micro-batches per step")
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--epochs", type=int, default=10)
    return parser.parse_args()


def train_one_epoch(model, loader, optimizer, scheduler, accum_iter):
    model.train()
    for it, batch in enumerate(loader):
        out = model(batch["x"])
        loss = F.mse_loss(out, batch["x"])
        loss.backward()  # expect: grad-accum-loss-not-scaled
        if (it + 1) % accum_iter == 0:
            optimizer.step()
            optimizer.zero_grad()
        scheduler.step()


def main():
    args = get_args()
    dist.init_process_group("nccl")
    model = DDP(ToyNet().cuda())
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=1000)
    dataset = ToyDataset(1024)
    sampler = DistributedSampler(dataset)
    loader = DataLoader(dataset, batch_size=32, sampler=sampler)
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        train_one_epoch(model, loader, optimizer, scheduler, args.accum_iter)


if __name__ == "__main__":
    main()

"""The same bypass as an if statement on ``args.world_size``, inside a step function."""
# scan-facts: forward_bypasses_ddp=true
import argparse

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

from _toy import ToyDataset, ToyNet


def train_step(model, inp, optimizer, args):
    if args.world_size > 1:
        out = model.module(inp)  # expect: ddp-wrapper-bypassed
    else:
        out = model(inp)  # ok: ddp-wrapper-bypassed
    loss = out.square().mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.detach()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--world_size", type=int, default=1)
    parser.add_argument("--epochs", type=int, default=10)
    args = parser.parse_args()
    dist.init_process_group("nccl", world_size=args.world_size)
    model = DDP(ToyNet().cuda())
    ds = ToyDataset(1024)
    sampler = DistributedSampler(ds)
    loader = DataLoader(ds, batch_size=32, sampler=sampler)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        for batch in loader:
            train_step(model, batch["x"].cuda(), optimizer, args)


if __name__ == "__main__":
    main()

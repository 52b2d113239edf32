"""The same small classifier sharded with FSDP2 (fully_shard per block, then the root) on CPU:
parameters are DTensor shards; accumulation turns gradient sync off until the last micro step."""

import argparse
import gc

import torch
import torch.distributed as dist
import torch.nn as nn
from residual_net import Net
from torch.distributed.fsdp import fully_shard
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--accum", type=int, default=2)
    args = parser.parse_args()

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = Net()
    for block in model.blocks:
        fully_shard(block)
    fully_shard(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.01)

    g = torch.Generator().manual_seed(3)
    x = torch.randn(384, 12, generator=g)
    y = (x[:, :3].sum(1) > 0).long() + 2 * (x[:, 3] > 0).long()
    dataset = TensorDataset(x, y)
    sampler = DistributedSampler(dataset)
    loader = DataLoader(dataset, batch_size=16, sampler=sampler)
    criterion = nn.CrossEntropyLoss()

    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        for i, (xb, yb) in enumerate(loader):
            last = (i + 1) % args.accum == 0
            model.set_requires_gradient_sync(last)
            loss = criterion(model(xb), yb) / args.accum
            loss.backward()
            if last:
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                optimizer.zero_grad()
        report = loss.detach() * args.accum
        dist.all_reduce(report, op=dist.ReduceOp.AVG)
        if rank == 0:
            print(f"epoch {epoch}: loss {report.item():.4f}")

    del model, optimizer
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

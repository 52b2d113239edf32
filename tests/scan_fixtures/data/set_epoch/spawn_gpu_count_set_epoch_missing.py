"""One process per local GPU by ``mp.spawn`` when there are several, else the worker called
directly; the worker starts the process group and shards the data under the same GPU-count test,
but never sets the sampler's epoch. The direct call is the single-process path, not a second
reading of the distributed job."""
# scan-facts: calls_set_epoch=false uses_distributed_sampler=true
import argparse

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

from _toy import ToyDataset, ToyNet


def worker(rank, opts):
    if opts.gpus > 1:
        dist.init_process_group("nccl", init_method="tcp://127.0.0.1:23456",
                                world_size=opts.gpus, rank=rank)
    net = ToyNet().cuda(rank)
    if opts.gpus > 1:
        net = DDP(net, device_ids=[rank])
    opt = torch.optim.Adam(net.parameters(), lr=2e-4)
    data = ToyDataset(8192)
    sampler = DistributedSampler(data) if opts.gpus > 1 else None
    loader = DataLoader(data, batch_size=opts.batch, shuffle=sampler is None, sampler=sampler)
    for epoch in range(opts.epochs):  # expect: sampler-set-epoch-missing
        for batch in loader:
            loss = net(batch["x"].cuda(rank)).abs().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=100)
    parser.add_argument("--batch", type=int, default=32)
    opts = parser.parse_args()
    opts.gpus = torch.cuda.device_count()
    if opts.gpus > 1:
        mp.spawn(worker, nprocs=opts.gpus, args=(opts,))
    else:
        worker(0, opts)


if __name__ == "__main__":
    main()

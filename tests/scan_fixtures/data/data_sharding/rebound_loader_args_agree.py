"""Inside main, a command-line switch picks a smaller debug loader. Both helpers shard with a
DistributedSampler, so sharding stays decided; their batch sizes differ, so that does not."""
# scan-facts: uses_distributed_sampler=true per_gpu_batch_size=unknown
import argparse

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, Subset

from _toy import ToyDataset, ToyNet


def full_loader(ds):
    return DataLoader(ds, batch_size=32, sampler=DistributedSampler(ds))


def debug_loader(ds):
    small = Subset(ds, range(64))
    return DataLoader(small, batch_size=8, sampler=DistributedSampler(small))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--debug-subset", action="store_true")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    make_loader = full_loader
    if args.debug_subset:
        make_loader = debug_loader
    loader = make_loader(ToyDataset(512))
    model = DDP(ToyNet())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for batch in loader:
        loss = model(batch["x"]).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad()


main()

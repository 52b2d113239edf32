"""A CUDA prefetcher wraps the loader; the step loop is ``while batch is not None`` over its
``next()``. Each epoch builds a new prefetcher (a new pass over the loader), never setting the
sampler's epoch."""
# scan-facts: calls_set_epoch=false uses_distributed_sampler=true
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

from _meters import CudaPrefetcher
from _toy import ToyDataset, ToyNet


def train_epoch(model, loader, opt, device):
    prefetcher = CudaPrefetcher(loader, device)
    batch = prefetcher.next()
    while batch is not None:
        loss = model(batch["x"]).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        batch = prefetcher.next()


def main():
    dist.init_process_group("nccl")
    device = torch.device("cuda", dist.get_rank() % torch.cuda.device_count())
    ds = ToyDataset(4096)
    loader = DataLoader(ds, batch_size=64, sampler=DistributedSampler(ds), pin_memory=True)
    model = DDP(ToyNet().to(device))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(90):  # expect: sampler-set-epoch-missing
        train_epoch(model, loader, opt, device)


main()

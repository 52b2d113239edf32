"""Helper module imported by the launcher fixtures (not a fixture itself): the training
functions a launcher runs in each process."""
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

from _toy import ToyDataset, ToyNet


def train(epochs):
    dist.init_process_group("nccl")
    rank = dist.get_rank()
    model = DDP(ToyNet().cuda(rank), device_ids=[rank])
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    data = ToyDataset(1024)
    sampler = DistributedSampler(data)
    loader = DataLoader(data, batch_size=32, sampler=sampler)
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        for batch in loader:
            x = batch["x"].cuda(rank)
            loss = F.mse_loss(model(x), x)
            opt.zero_grad()
            loss.backward()
            opt.step()


def worker(rank, world_size, epochs):
    dist.init_process_group("nccl", rank=rank, world_size=world_size)
    model = DDP(ToyNet().cuda(rank), device_ids=[rank])
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    data = ToyDataset(1024)
    sampler = DistributedSampler(data)
    loader = DataLoader(data, batch_size=32, sampler=sampler)
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        for batch in loader:
            x = batch["x"].cuda(rank)
            loss = F.mse_loss(model(x), x)
            opt.zero_grad()
            loss.backward()
            opt.step()

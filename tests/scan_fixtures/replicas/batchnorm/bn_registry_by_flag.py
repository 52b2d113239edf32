"""A model registry keyed by a command-line name: the default picks a class without
BatchNorm, another name picks one with it."""
# scan-facts: has_batchnorm=unknown
import argparse

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 10))

    def forward(self, x):
        return self.net(x)


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Conv1d(1, 8, 3), nn.BatchNorm1d(8), nn.ReLU(), nn.Flatten())
        self.head = nn.LazyLinear(10)

    def forward(self, x):
        return self.head(self.net(x.unsqueeze(1)))


MODELS = {"mlp": MLP, "conv": ConvNet}

parser = argparse.ArgumentParser()
parser.add_argument("--model", default="mlp", choices=list(MODELS))
args = parser.parse_args()

dist.init_process_group("nccl")
model = DDP(MODELS[args.model]().cuda())  # ok: batchnorm-without-syncbn
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
for step in range(1000):
    x = torch.randn(64, 32, device="cuda")
    y = torch.randint(0, 10, (64,), device="cuda")
    loss = nn.functional.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()

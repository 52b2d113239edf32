"""A ResNet-like class that takes its block and norm layer as parameters: the layer classes
are the caller's choice, and here the caller's choice comes from a config the scan cannot read."""
# scan-facts: has_batchnorm=unknown
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

from projconf import NORM_LAYER


class Block(nn.Module):
    def __init__(self, width, norm_layer):
        super().__init__()
        self.conv = nn.Conv2d(width, width, 3, padding=1)
        self.norm = norm_layer(width)

    def forward(self, x):
        return torch.relu(self.norm(self.conv(x))) + x


class Net(nn.Module):
    def __init__(self, norm_layer, width=16):
        super().__init__()
        self.stem = nn.Conv2d(3, width, 3, padding=1)
        self.blocks = nn.Sequential(*[Block(width, norm_layer) for _ in range(3)])
        self.head = nn.Linear(width, 10)

    def forward(self, x):
        return self.head(self.blocks(self.stem(x)).mean(dim=(2, 3)))


dist.init_process_group("nccl")
model = DDP(Net(NORM_LAYER).cuda())  # ok: batchnorm-without-syncbn
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(1000):
    x = torch.randn(16, 3, 32, 32, device="cuda")
    y = torch.randint(0, 10, (16,), device="cuda")
    loss = nn.functional.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()

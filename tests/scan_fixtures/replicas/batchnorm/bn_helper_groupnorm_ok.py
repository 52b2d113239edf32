"""The decided lookalike: every layer the model builds is visible (through a helper
function of the script), and none is a BatchNorm."""
# scan-facts: has_batchnorm=false
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def conv_gn(cin, cout, groups=4):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.GroupNorm(groups, cout), nn.SiLU())


class Encoder(nn.Module):
    def __init__(self, width=32):
        super().__init__()
        self.stem = conv_gn(3, width)
        self.blocks = nn.Sequential(*[conv_gn(width, width) for _ in range(4)])
        self.head = nn.Linear(width, 10)

    def forward(self, x):
        h = self.blocks(self.stem(x))
        return self.head(h.mean(dim=(2, 3)))


dist.init_process_group("nccl")
model = DDP(Encoder().cuda())  # ok: batchnorm-without-syncbn
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
for step in range(1000):
    x = torch.randn(16, 3, 32, 32, device="cuda")
    y = torch.randint(0, 10, (16,), device="cuda")
    loss = nn.functional.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()

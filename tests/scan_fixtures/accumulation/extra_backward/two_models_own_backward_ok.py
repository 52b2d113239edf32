"""Two separately wrapped models trained side by side (an A/B of two widths), each with its own
loss and backward through its own DDP wrapper: one backward per model, no extra one."""
# scan-facts: extra_backward_through_ddp=false
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("gloo")
narrow = DDP(nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1)))
wide = DDP(nn.Sequential(nn.Linear(16, 256), nn.ReLU(), nn.Linear(256, 1)))
opt_narrow = torch.optim.SGD(narrow.parameters(), lr=0.01)
opt_wide = torch.optim.SGD(wide.parameters(), lr=0.01)


def train_one(model, optimizer, x, y):
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
    return loss.item()


for step in range(1000):
    x, y = torch.randn(32, 16), torch.randn(32, 1)
    train_one(narrow, opt_narrow, x, y)
    train_one(wide, opt_wide, x, y)

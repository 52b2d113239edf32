"""A script whose folder holds a module named like a third-party package (utils.py: read, as
Python reads it first) and a folder named like torch (never read: torch is read through the
scan's own view). `models` is not in the repository: it stays the library's."""
# scan-facts: uses_distributed_sampler=false hand_written_loop=true
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader

import models
from data.loaders import make_dataset
from utils import step


def main():
    dist.init_process_group("nccl")
    model = DDP(models.Net().cuda())
    loader = DataLoader(make_dataset(), batch_size=16, shuffle=True)  # expect: no-distributed-sampler
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(3):
        for x, y in loader:
            step(model, opt, x, y)


main()

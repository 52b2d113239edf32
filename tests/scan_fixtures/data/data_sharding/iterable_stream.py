"""A streaming IterableDataset that every rank reads in full."""
# scan-facts: uses_distributed_sampler=false
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, IterableDataset

from _toy import ToyNet


class Stream(IterableDataset):
    def __init__(self, path):
        self.path = path

    def __iter__(self):
        with open(self.path) as f:
            for line in f:
                yield torch.tensor([float(v) for v in line.split()])


dist.init_process_group("gloo")
loader = DataLoader(Stream("data.txt"), batch_size=16)  # expect: no-distributed-sampler
model = DDP(ToyNet())
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for x in loader:
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()

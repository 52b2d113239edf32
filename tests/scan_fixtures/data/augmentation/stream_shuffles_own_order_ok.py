"""An IterableDataset that shuffles its own index order each epoch through a helper (as a
sampler would) and yields the examples unchanged: the order is random, the examples are not
augmented: no random augmentation."""
# scan-facts: uses_random_augmentation=false
import os

import numpy as np
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, IterableDataset

from _toy import ToyNet


class Blocks(IterableDataset):
    def __init__(self, n, rank, world, seed=0):
        self.rows = torch.randn(n, 16)
        self.rank, self.world, self.seed, self.epoch = rank, world, seed, 0

    def _order(self):
        idx = np.arange(len(self.rows))
        rng = np.random.Generator(np.random.PCG64(self.seed + self.epoch))
        rng.shuffle(idx)
        return idx[self.rank :: self.world]

    def __iter__(self):
        for i in self._order():
            yield self.rows[i]


dist.init_process_group("nccl")
local_rank = int(os.environ["LOCAL_RANK"])
model = DDP(ToyNet().cuda(), device_ids=[local_rank])
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
data = Blocks(512, dist.get_rank(), dist.get_world_size())
loader = DataLoader(data, batch_size=16)
for epoch in range(3):
    data.epoch = epoch
    for x in loader:
        loss = model(x.cuda()).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

"""The global RNG gets the same seed everywhere, but the DataLoader's own generator (which
seeds its workers) is seeded with the rank: the data-side RNG differs per rank."""
# scan-facts: rank_seeds_identical=false
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler

from _toy import ToyDataset, ToyNet

dist.init_process_group("nccl")
rank = dist.get_rank()
local_rank = int(os.environ["LOCAL_RANK"])
torch.manual_seed(1234)
model = DDP(ToyNet().cuda(), device_ids=[local_rank])
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
data = ToyDataset(512)
sampler = DistributedSampler(data)
workers_rng = torch.Generator()
workers_rng.manual_seed(1000 + rank)
loader = DataLoader(data, batch_size=16, sampler=sampler, num_workers=2, generator=workers_rng)
for epoch in range(3):
    sampler.set_epoch(epoch)
    for batch in loader:
        loss = model(batch["x"].cuda()).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

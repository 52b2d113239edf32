"""Every rank seeds the global RNG with the same constant; a separate torch.Generator, seeded
with the rank, only samples preview text under no_grad. The training RNG is the same on every
rank."""
# scan-facts: rank_seeds_identical=true
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
loader = DataLoader(data, batch_size=16, sampler=sampler)
for epoch in range(3):
    sampler.set_epoch(epoch)
    for batch in loader:
        loss = model(batch["x"].cuda()).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    preview_rng = torch.Generator(device="cuda")
    preview_rng.manual_seed(7 + rank)
    with torch.no_grad():
        probe = torch.randn(4, 16, device="cuda", generator=preview_rng)
        print(rank, model(probe).softmax(-1).argmax(-1).tolist())

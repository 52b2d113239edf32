"""Two well-meant world-size corrections: one on the loss, one on the learning rate."""
# scan-facts: loss_multiplied_by_world_size=true lr_scaling=linear per_gpu_batch_size=unknown
import os

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

from _toy import ToyDataset, ToyNet

BASE_LR = 1e-4
GLOBAL_BATCH = 256

dist.init_process_group("nccl")
world_size = int(os.environ["WORLD_SIZE"])
model = DDP(ToyNet().cuda())
ds = ToyDataset(4096)
sampler = DistributedSampler(ds)
loader = DataLoader(ds, batch_size=GLOBAL_BATCH // world_size, sampler=sampler)
lr = BASE_LR * world_size  # expect: lr-scaled-too-aggressively
opt = torch.optim.AdamW(model.parameters(), lr=lr)

for epoch in range(10):
    sampler.set_epoch(epoch)
    for batch in loader:
        x = batch["x"].cuda()
        loss = F.mse_loss(model(x), x)
        loss = loss * world_size  # expect: loss-scaled-by-world-size
        opt.zero_grad()
        loss.backward()
        opt.step()

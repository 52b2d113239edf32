"""A GAN under one GradScaler: the discriminator's optimizer is unscaled before its gradients
are clipped, but the generator's gradients are clipped while still scaled; the earlier
unscale_(opt_d) did nothing for the generator."""
# scan-facts: uses_grad_clipping=true unscale_before_clip=false
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler

from _toy import ToyDataset, ToyNet

dist.init_process_group("nccl")
local_rank = int(os.environ["LOCAL_RANK"])
gen = DDP(ToyNet().cuda(), device_ids=[local_rank])
disc = DDP(nn.Linear(16, 1).cuda(), device_ids=[local_rank])
opt_g = torch.optim.AdamW(gen.parameters(), lr=2e-4)
opt_d = torch.optim.AdamW(disc.parameters(), lr=2e-4)
scaler = torch.cuda.amp.GradScaler()
data = ToyDataset(512)
sampler = DistributedSampler(data)
loader = DataLoader(data, batch_size=16, sampler=sampler)
for epoch in range(3):
    sampler.set_epoch(epoch)
    for batch in loader:
        real = batch["x"].cuda()
        with torch.autocast("cuda", dtype=torch.float16):
            fake = gen(torch.randn_like(real))
            loss_d = (disc(fake.detach()) - disc(real)).mean()
        opt_d.zero_grad()
        scaler.scale(loss_d).backward()
        scaler.unscale_(opt_d)
        torch.nn.utils.clip_grad_norm_(disc.parameters(), 1.0)
        scaler.step(opt_d)
        with torch.autocast("cuda", dtype=torch.float16):
            loss_g = -disc(fake).mean()
        opt_g.zero_grad()
        scaler.scale(loss_g).backward()
        torch.nn.utils.clip_grad_norm_(gen.parameters(), 1.0)  # expect: clip-before-unscale
        scaler.step(opt_g)
        scaler.update()

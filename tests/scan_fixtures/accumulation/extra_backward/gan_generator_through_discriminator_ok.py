"""GAN step as VITS / HiFi-GAN write it: the discriminator learns on a detached fake, then the
generator's loss goes through the discriminator again in a forward of its own. Each backward
has its own DDP forward on every step: no extra backward through DDP."""
# scan-facts: extra_backward_through_ddp=false
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

dist.init_process_group("nccl")
rank = dist.get_rank()
net_g = DDP(nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 8)).cuda(rank))
net_d = DDP(nn.Sequential(nn.Linear(8, 32), nn.LeakyReLU(), nn.Linear(32, 1)).cuda(rank))
optim_g = torch.optim.AdamW(net_g.parameters(), lr=2e-4)
optim_d = torch.optim.AdamW(net_d.parameters(), lr=2e-4)
data = TensorDataset(torch.randn(1024, 8))
sampler = DistributedSampler(data)
loader = DataLoader(data, batch_size=32, sampler=sampler)
for epoch in range(10):
    sampler.set_epoch(epoch)
    for (real,) in loader:
        real = real.cuda(rank)
        fake = net_g(torch.randn_like(real))
        d_real, d_fake = net_d(real), net_d(fake.detach())
        loss_d = (1 - d_real).pow(2).mean() + d_fake.pow(2).mean()
        optim_d.zero_grad()
        loss_d.backward()
        optim_d.step()

        loss_g = (1 - net_d(fake)).pow(2).mean() + (fake - real).abs().mean()
        optim_g.zero_grad()
        loss_g.backward()  # ok: extra-backward-through-ddp
        optim_g.step()

"""A GAN with a DDP wrapper per network. The generator is called through ``.module`` (as the
checkpoint code reaches it), while its loss also goes through the discriminator's wrapper:
the discriminator's gradients are averaged, the generator's never are."""
# scan-facts: forward_bypasses_ddp=true
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

from _toy import ToyNet

dist.init_process_group("nccl")
gen = DDP(ToyNet().cuda())
disc = DDP(ToyNet().cuda())
opt_g = torch.optim.Adam(gen.parameters(), lr=2e-4, betas=(0.5, 0.999))
opt_d = torch.optim.Adam(disc.parameters(), lr=2e-4, betas=(0.5, 0.999))
for step in range(10000):
    z = torch.randn(16, 16, device="cuda")
    real = torch.randn(16, 16, device="cuda")
    fake = gen.module(z)  # expect: ddp-wrapper-bypassed

    opt_d.zero_grad()
    d_loss = F.softplus(disc(fake.detach())).mean() + F.softplus(-disc(real)).mean()
    d_loss.backward()
    opt_d.step()

    opt_g.zero_grad()
    g_loss = F.softplus(-disc(fake)).mean() + F.l1_loss(fake, real)
    g_loss.backward()
    opt_g.step()

"""A GAN whose discriminator sees real and generated samples in one batch built with
``torch.cat([real, fake.detach()])``: the detach sits inside the concatenation, yet it cuts the
discriminator's loss off the generator's forward. The generator's later loss goes through its
own discriminator pass after the discriminator stepped: no second backward through one DDP
forward."""
# scan-facts: extra_backward_through_ddp=false
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("gloo")
netG = DDP(nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 2)))
netD = DDP(nn.Sequential(nn.Linear(2, 32), nn.ReLU(), nn.Linear(32, 1)))
optG = torch.optim.Adam(netG.parameters(), lr=1e-3, betas=(0.5, 0.999))
optD = torch.optim.Adam(netD.parameters(), lr=1e-3, betas=(0.5, 0.999))
ones, zeros = torch.ones(64, 1), torch.zeros(64, 1)
for it in range(1000):
    real = torch.randn(64, 2)
    fake = netG(torch.randn(64, 8))
    logits = netD(torch.cat([real, fake.detach()]))
    lossD = F.binary_cross_entropy_with_logits(logits, torch.cat([ones, zeros]))
    optD.zero_grad(set_to_none=True)
    lossD.backward()
    optD.step()
    lossG = F.binary_cross_entropy_with_logits(netD(fake), ones)
    optG.zero_grad(set_to_none=True)
    lossG.backward()
    optG.step()

"""A tiny 2-D GAN on a ring of points: generator and discriminator each wrapped in DDP, two Adam
optimizers each with its own decaying schedule, the usual alternating discriminator then
generator updates; the samples are drawn by a per-rank generator, no DataLoader."""

import gc

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP



def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    G = DDP(nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 2)))
    D = DDP(nn.Sequential(nn.Linear(2, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1)))
    opt_d = torch.optim.Adam(D.parameters(), lr=2e-3, betas=(0.5, 0.999))
    opt_g = torch.optim.Adam(G.parameters(), lr=2e-3, betas=(0.5, 0.999))
    decay = lambda step: 1.0 / (1.0 + 0.05 * step)  # noqa: E731
    sched_d = torch.optim.lr_scheduler.LambdaLR(opt_d, decay)
    sched_g = torch.optim.lr_scheduler.LambdaLR(opt_g, decay)
    bce = nn.BCEWithLogitsLoss()
    gen = torch.Generator().manual_seed(100 + rank)
    for it in range(40):
        angle = torch.rand(32, generator=gen) * 6.2832
        real = torch.stack([angle.cos(), angle.sin()], 1) + 0.05 * torch.randn(32, 2, generator=gen)
        z = torch.randn(32, 4, generator=gen)
        fake = G(z)
        d_loss = bce(D(real), torch.ones(32, 1)) + bce(D(fake.detach()), torch.zeros(32, 1))
        opt_d.zero_grad()
        d_loss.backward()
        opt_d.step()
        g_loss = bce(D(fake), torch.ones(32, 1))
        opt_g.zero_grad()
        g_loss.backward()
        opt_g.step()
        sched_d.step()
        sched_g.step()
        if rank == 0 and it % 10 == 0:
            print(f"it {it} d {d_loss.item():.3f} g {g_loss.item():.3f}")
    del G, D
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

"""2-D GAN on the eight-Gaussians ring: generator and discriminator, each its own DDP.

Real points and latent noise are sampled on the fly from a per-rank generator; the
discriminator sees real and fake points in one batch; the generator loss is non-saturating.
"""

import argparse
import gc
import itertools
import math

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP


def sample_ring(n, gen, modes=8, radius=2.0, std=0.05):
    k = torch.randint(modes, (n,), generator=gen)
    angle = 2 * math.pi * k.float() / modes
    centers = torch.stack([angle.cos(), angle.sin()], 1) * radius
    return centers + std * torch.randn(n, 2, generator=gen)


def mlp(sizes, out_act=None):
    layers = []
    for a, b in itertools.pairwise(sizes):
        layers += [nn.Linear(a, b), nn.LeakyReLU(0.2)]
    layers = layers[:-1]
    if out_act is not None:
        layers.append(out_act)
    return nn.Sequential(*layers)


@torch.no_grad()
def mode_coverage(netG, gen, z_dim, n=512, modes=8, radius=2.0):
    pts = netG(torch.randn(n, z_dim, generator=gen))
    angle = 2 * math.pi * torch.arange(modes) / modes
    centers = torch.stack([angle.cos(), angle.sin()], 1) * radius
    d = torch.cdist(pts, centers)
    nearest = d.min(1)
    good = nearest.values < 0.3
    covered = torch.bincount(nearest.indices[good], minlength=modes) > 0
    return good.float().mean().item(), int(covered.sum())


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--iters", type=int, default=40)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--z-dim", type=int, default=8)
    p.add_argument("--lr-g", type=float, default=1e-3)
    p.add_argument("--lr-d", type=float, default=1e-3)
    p.add_argument("--log-every", type=int, default=10)
    p.add_argument("--seed", type=int, default=3)
    args = p.parse_args()

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()

    torch.manual_seed(args.seed)
    netG = mlp([args.z_dim, 64, 64, 2])
    netD = mlp([2, 64, 64, 1])
    netG = DDP(netG)
    netD = DDP(netD)  # fault gan_d_not_wrapped: -

    optG = torch.optim.Adam(netG.parameters(), lr=args.lr_g, betas=(0.5, 0.999))
    optD = torch.optim.Adam(netD.parameters(), lr=args.lr_d, betas=(0.5, 0.999))
    sample_gen = torch.Generator().manual_seed(args.seed * 1000 + rank)  # fault gan_same_stream: sample_gen = torch.Generator().manual_seed(args.seed * 1000)

    ones = torch.ones(args.batch, 1)
    zeros = torch.zeros(args.batch, 1)
    hist = torch.zeros(2)
    for it in range(1, args.iters + 1):
        real = sample_ring(args.batch, sample_gen)
        z = torch.randn(args.batch, args.z_dim, generator=sample_gen)
        fake = netG(z)

        # discriminator
        logits = netD(torch.cat([real, fake.detach()]))
        lossD = F.binary_cross_entropy_with_logits(logits, torch.cat([ones, zeros]))
        optD.zero_grad(set_to_none=True)
        lossD.backward()
        optD.step()

        # generator (non-saturating)
        lossG = F.binary_cross_entropy_with_logits(netD(fake), ones)
        optG.zero_grad(set_to_none=True)
        lossG.backward()
        optG.step()

        hist += torch.stack([lossD.detach(), lossG.detach()])
        if it % args.log_every == 0:
            dist.all_reduce(hist)
            hist /= world * args.log_every
            if rank == 0:
                print(f"iter {it:4d}  loss_D {hist[0]:.4f}  loss_G {hist[1]:.4f}")
            hist.zero_()

    if rank == 0:
        netG.eval()
        frac, covered = mode_coverage(netG.module, torch.Generator().manual_seed(0), args.z_dim)
        print(f"samples near a mode: {frac:.2%}, modes covered: {covered}/8")

    del netG, netD
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

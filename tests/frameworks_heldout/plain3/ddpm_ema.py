"""A DDPM-style denoiser on a 2-D point cloud, with a cosine noise schedule and an EMA copy.

The network predicts the noise added at a random timestep. Timesteps and noise come from a
generator seeded per rank; the EMA copy is taken from the wrapped module after DDP has
broadcast rank 0's weights, and rank 0 samples from it at the end.

Launch: torchrun --nproc_per_node 2 ddpm_ema.py
"""

from __future__ import annotations

import copy
import gc
import math

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

T = 100


def cosine_alpha_bar(steps: int, s: float = 0.008) -> torch.Tensor:
    x = torch.linspace(0, steps, steps + 1, dtype=torch.float64)
    f = torch.cos(((x / steps) + s) / (1 + s) * math.pi / 2) ** 2
    betas = (1 - f[1:] / f[:-1]).clamp(max=0.999)
    return torch.cumprod(1 - betas, dim=0).float()


def two_spirals(n: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    theta = torch.rand(n, generator=g) * 3 * math.pi
    arm = torch.randint(0, 2, (n,), generator=g) * 2 - 1
    r = theta / (3 * math.pi)
    pts = torch.stack([r * torch.cos(theta), r * torch.sin(theta)], dim=1) * arm[:, None]
    return pts + 0.02 * torch.randn(n, 2, generator=g)


class TimeEmbedding(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, t: torch.Tensor) -> torch.Tensor:
        half = self.dim // 2
        freqs = torch.exp(-math.log(1000.0) * torch.arange(half) / half)
        ang = t.float()[:, None] * freqs[None]
        return torch.cat([ang.sin(), ang.cos()], dim=1)


class Denoiser(nn.Module):
    def __init__(self, hidden: int = 96) -> None:
        super().__init__()
        self.temb = nn.Sequential(TimeEmbedding(32), nn.Linear(32, hidden), nn.SiLU())
        self.inp = nn.Linear(2, hidden)
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.LayerNorm(hidden), nn.Linear(hidden, hidden), nn.SiLU())
            for _ in range(3)
        )
        self.out = nn.Linear(hidden, 2)

    def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        h = self.inp(x) + self.temb(t)
        for block in self.blocks:
            h = h + block(h)
        return self.out(h)


@torch.no_grad()
def sample(net: nn.Module, alpha_bar: torch.Tensor, n: int, g: torch.Generator) -> torch.Tensor:
    x = torch.randn(n, 2, generator=g)
    for t in range(T - 1, -1, -1):
        ab = alpha_bar[t]
        ab_prev = alpha_bar[t - 1] if t > 0 else torch.tensor(1.0)
        beta = 1 - ab / ab_prev
        eps = net(x, torch.full((n,), t))
        # posterior q(x_{t-1} | x_t, x0) around a clipped estimate of x0
        x0 = ((x - (1 - ab).sqrt() * eps) / ab.sqrt()).clamp(-1.5, 1.5)
        mean = (ab_prev.sqrt() * beta * x0 + (1 - beta).sqrt() * (1 - ab_prev) * x) / (1 - ab)
        x = mean
        if t > 0:
            var = beta * (1 - ab_prev) / (1 - ab)
            x = x + var.sqrt() * torch.randn(x.shape, generator=g)
    return x


def main() -> None:
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(1)
    torch.manual_seed(7)

    data = TensorDataset(two_spirals(2048, seed=5))
    sampler = DistributedSampler(data, shuffle=True, seed=0)
    per_rank_batch = 64
    loader = DataLoader(data, batch_size=per_rank_batch, sampler=sampler, drop_last=True)

    model = DDP(Denoiser())
    ema = copy.deepcopy(model.module).eval().requires_grad_(False)
    ema_decay = 0.95

    global_batch = per_rank_batch * world
    lr = 1e-3 * global_batch / 128  # fault ddpm_lr_scaled: lr = 1e-3 * global_batch / 16
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    alpha_bar = cosine_alpha_bar(T)
    noise_gen = torch.Generator().manual_seed(100 + rank)

    for epoch in range(3):
        sampler.set_epoch(epoch)
        model.train()
        totals = torch.zeros(2)
        for (x0,) in loader:
            t = torch.randint(0, T, (x0.shape[0],), generator=noise_gen)
            eps = torch.randn(x0.shape, generator=noise_gen)
            ab = alpha_bar[t][:, None]
            xt = ab.sqrt() * x0 + (1 - ab).sqrt() * eps
            pred = model(xt, t)  # fault ddpm_module_forward: pred = model.module(xt, t)
            loss = F.mse_loss(pred, eps)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            with torch.no_grad():
                for e, p in zip(ema.parameters(), model.module.parameters()):
                    e.lerp_(p, 1 - ema_decay)
            totals += torch.tensor([loss.item() * x0.shape[0], x0.shape[0]])
        dist.all_reduce(totals)
        if rank == 0:
            print(
                f"epoch {epoch} lr {lr:.1e} mean eps-MSE {totals[0].item() / totals[1].item():.4f}",
                flush=True,
            )

    if rank == 0:
        pts = sample(ema, alpha_bar, 512, torch.Generator().manual_seed(1))
        radius = pts.norm(dim=1)
        print(
            f"EMA samples: mean radius {radius.mean().item():.3f} (data ~0.5), max {radius.max().item():.2f}"
        )

    del model
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

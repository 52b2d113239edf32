"""Denoising MLP on synthetic 1-D signals: activation checkpointing per residual block,
noise levels drawn per rank, 2 micro-batches per update under no_sync, AdamW with warmup +
cosine, an EMA of the weights, evaluation every 4 updates with early stopping."""

import contextlib
import copy
import gc
import math

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.checkpoint import checkpoint
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

SIG = 16


class Block(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.ff = nn.Sequential(nn.Linear(d, 2 * d), nn.SiLU(), nn.Linear(2 * d, d))

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return h + self.ff(self.norm(h))


class Denoiser(nn.Module):
    def __init__(self, d: int = 48, depth: int = 3) -> None:
        super().__init__()
        self.inp = nn.Linear(SIG + 1, d)
        self.blocks = nn.ModuleList(Block(d) for _ in range(depth))
        self.out = nn.Linear(d, SIG)

    def forward(self, x: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
        h = self.inp(torch.cat([x, sigma.log().unsqueeze(1)], dim=1))
        for block in self.blocks:
            h = checkpoint(block, h, use_reentrant=False) if self.training else block(h)
        return self.out(h)


def signals(n: int, gen: torch.Generator) -> torch.Tensor:
    t = torch.linspace(0, 1, SIG)
    freq = torch.randint(1, 4, (n, 1), generator=gen).float()
    phase = torch.rand(n, 1, generator=gen) * 2 * math.pi
    return torch.sin(2 * math.pi * freq * t + phase)


@torch.no_grad()
def ema_update(ema: nn.Module, model: nn.Module, decay: float) -> None:
    for e, p in zip(ema.parameters(), model.parameters()):
        e.mul_(decay).add_(p.detach(), alpha=1 - decay)


def main() -> None:
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    data_gen = torch.Generator().manual_seed(7)
    train_set = TensorDataset(signals(384, data_gen))
    val_set = TensorDataset(signals(64, data_gen))

    model = DDP(Denoiser(), gradient_as_bucket_view=True)
    ema = copy.deepcopy(model.module).eval()
    for p in ema.parameters():
        p.requires_grad_(False)

    accum, micro_bs, updates = 2, 16, 24
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.01)
    warmup = 4

    def lr_at(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return 0.5 * (1 + math.cos(math.pi * (step - warmup) / (updates - warmup)))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_at)
    sampler = DistributedSampler(train_set, shuffle=True, seed=0)
    loader = DataLoader(train_set, batch_size=micro_bs, sampler=sampler, drop_last=True)
    val_loader = DataLoader(
        val_set, batch_size=16, sampler=DistributedSampler(val_set, shuffle=False)
    )
    noise_gen = torch.Generator().manual_seed(1000 + rank)

    def noisy(clean: torch.Tensor, gen: torch.Generator) -> tuple[torch.Tensor, ...]:
        sigma = torch.exp(torch.empty(clean.shape[0]).uniform_(-2.5, 0.5, generator=gen))
        noise = torch.randn(clean.shape, generator=gen)
        return clean + sigma.unsqueeze(1) * noise, sigma, noise

    def evaluate(model: nn.Module, ema: nn.Module) -> float:
        model.eval()
        gen = torch.Generator().manual_seed(99 + rank)
        stats = torch.zeros(2)
        with torch.no_grad():
            for (clean,) in val_loader:
                x, sigma, noise = noisy(clean, gen)
                stats[0] += F.mse_loss(ema(x, sigma), noise, reduction="sum") / SIG
                stats[1] += clean.shape[0]
        dist.all_reduce(stats)  # fault dn_val_mean_summed: mean = stats[0] / stats[1] || dist.all_reduce(mean) || model.train() || return mean.item()
        model.train()
        return (stats[0] / stats[1]).item()

    step, epoch, best, bad = 0, 0, float("inf"), 0
    model.train()
    done = False
    while not done:
        sampler.set_epoch(epoch)
        batches = iter(loader)
        while True:
            micro = [b for _, b in zip(range(accum), batches)]
            if len(micro) < accum:
                break
            opt.zero_grad(set_to_none=True)  # fault dn_zero_grad_micro: -
            window = torch.zeros(1)
            for i, (clean,) in enumerate(micro):  # fault dn_zero_grad_micro: = || >opt.zero_grad(set_to_none=True)
                x, sigma, noise = noisy(clean, noise_gen)
                sync = i == accum - 1  # fault dn_sync_first_micro: sync = i == 0
                ctx = model.no_sync() if not sync else contextlib.nullcontext()
                with ctx:
                    loss = F.mse_loss(model(x, sigma), noise)
                    (loss / accum).backward()
                window += loss.detach() / accum
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            ema_update(ema, model.module, 0.9)
            step += 1
            dist.all_reduce(window)
            if rank == 0:
                print(f"step {step} loss {window.item() / world:.4f} lr {sched.get_last_lr()[0]:.2e}")
            if step % 4 == 0:
                val = evaluate(model, ema)
                if rank == 0:
                    print(f"step {step} val {val:.4f}")
                if val < best - 1e-4:
                    best, bad = val, 0
                else:
                    bad += 1
                if bad >= 2 or step >= updates:
                    done = True
                    break
        epoch += 1

    del model, ema
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

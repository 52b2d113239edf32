"""A variational autoencoder on synthetic bar images, fp16 autocast, resumed halfway.

16x16 images of random horizontal and vertical bars (Bernoulli targets). An MLP encoder
gives mean and log-variance of an 8-d latent; the reparameterisation noise comes from a
generator seeded per rank. The loss is the summed Bernoulli log-likelihood per image plus a
KL term whose weight rises linearly over the first updates. fp16 autocast with a
GradScaler that starts low and grows every 4 clean steps, unscale before clipping, Adam.

The job stops after its first half (rank 0 writes model, optimizer, scaler and step) and
resumes from that checkpoint in a fresh model, optimizer and scaler on every rank, as a
preempted job does.

    python -m torch.distributed.run --nproc_per_node 2 vae_kl_anneal.py
"""

from __future__ import annotations

import argparse
import gc
import os
import tempfile

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

SIDE, LATENT = 16, 8


def bars(count: int, seed: int) -> TensorDataset:
    gen = torch.Generator().manual_seed(seed)
    rows = (torch.rand(count, SIDE, 1, generator=gen) < 0.2).float()
    cols = (torch.rand(count, 1, SIDE, generator=gen) < 0.2).float()
    images = torch.clamp(rows + cols, max=1.0)
    return TensorDataset(images.reshape(count, -1))


class VAE(nn.Module):
    def __init__(self, hidden: int = 128) -> None:
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(SIDE * SIDE, hidden), nn.ReLU())
        self.stats = nn.Linear(hidden, 2 * LATENT)
        self.dec = nn.Sequential(
            nn.Linear(LATENT, hidden), nn.ReLU(), nn.Linear(hidden, SIDE * SIDE)
        )

    def forward(
        self, x: torch.Tensor, noise: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        mu, logvar = self.stats(self.enc(x)).chunk(2, dim=1)
        z = mu + noise * torch.exp(0.5 * logvar)
        return self.dec(z), mu, logvar


def build(args: argparse.Namespace) -> tuple[DDP, torch.optim.Optimizer, torch.amp.GradScaler]:
    model = DDP(VAE())
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**10, growth_interval=4)
    return model, optimizer, scaler


def train(
    args: argparse.Namespace,
    model: DDP,
    optimizer: torch.optim.Optimizer,
    scaler: torch.amp.GradScaler,
    start: int,
    stop: int,
    rank: int,
) -> int:
    data = bars(512, args.seed)
    sampler = DistributedSampler(data, shuffle=True, seed=args.seed)
    loader = DataLoader(data, batch_size=args.batch, sampler=sampler)
    noise_gen = torch.Generator().manual_seed(args.seed + 100 * rank + start)
    step, epoch = start, start // len(loader)
    while step < stop:
        sampler.set_epoch(epoch)
        for (x,) in loader:
            if step >= stop:
                break
            beta = min(1.0, step / args.anneal)
            noise = torch.randn(x.shape[0], LATENT, generator=noise_gen)
            with torch.autocast("cpu", dtype=torch.float16):
                logits, mu, logvar = model(x, noise)
            recon = F.binary_cross_entropy_with_logits(logits.float(), x, reduction="sum")
            kl = -0.5 * torch.sum(1 + logvar.float() - mu.float() ** 2 - logvar.float().exp())
            loss = (recon + beta * kl) / x.shape[0]

            optimizer.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)  # fault vae_clip_scaled: -
            torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
            scaler.step(optimizer)
            scaler.update()

            report = torch.stack([loss.detach(), (recon / x.shape[0]).detach()])
            dist.all_reduce(report, op=dist.ReduceOp.AVG)
            if rank == 0 and step % 4 == 0:
                print(
                    f"step {step} beta {beta:.2f} loss {report[0].item():.2f} "
                    f"recon {report[1].item():.2f} scale {scaler.get_scale():.0f}",
                    flush=True,
                )
            step += 1
        epoch += 1
    return step


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=24)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--anneal", type=int, default=12)
    parser.add_argument("--seed", type=int, default=5)
    args = parser.parse_args()

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(args.seed)

    ckpt_dir = [tempfile.mkdtemp(prefix="vae_ckpt_") if rank == 0 else None]
    dist.broadcast_object_list(ckpt_dir)
    path = os.path.join(str(ckpt_dir[0]), "half.pt")

    model, optimizer, scaler = build(args)
    step = train(args, model, optimizer, scaler, 0, args.steps // 2, rank)
    if rank == 0:
        state = {
            "model": model.module.state_dict(),
            "optimizer": optimizer.state_dict(),
            "scaler": scaler.state_dict(),
            "step": step,
        }
        torch.save(state, path)
    dist.barrier()
    del model, optimizer, scaler
    gc.collect()

    # resume, as a restarted job would: fresh objects, state from the checkpoint
    model, optimizer, scaler = build(args)
    ckpt = torch.load(path, map_location="cpu")
    model.module.load_state_dict(ckpt["model"])  # fault vae_resume_rank0: if rank == 0: || >=
    optimizer.load_state_dict(ckpt["optimizer"])  # fault vae_resume_rank0: >=
    scaler.load_state_dict(ckpt["scaler"])  # fault vae_scaler_rank0: if rank == 0: || >=  # fault vae_resume_rank0: >=
    if rank == 0:
        print(f"resumed at step {ckpt['step']} scale {scaler.get_scale():.0f}", flush=True)
    train(args, model, optimizer, scaler, ckpt["step"], args.steps, rank)

    dist.barrier()
    if rank == 0:
        os.remove(path)
        os.rmdir(str(ckpt_dir[0]))
    del model, optimizer, scaler
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

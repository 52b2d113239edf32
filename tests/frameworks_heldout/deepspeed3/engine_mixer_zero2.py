"""MLP-Mixer image classifier fine-tuned from a warm start with DeepSpeed ZeRO-2.

The engine is driven directly: a client torch AdamW (no decay on norms and biases) and a
client warmup -> cosine SequentialLR handed to deepspeed.initialize, which steps both once
per optimizer step; gradient accumulation and clipping come from the config. The loop owns
its DataLoader and DistributedSampler (one shared shuffle seed, set_epoch every epoch) and
mixes samples (mixup) with a generator seeded per rank. The warm start is a checkpoint of a
first stage, loaded into the model before DeepSpeed wraps it.

    torchrun --nproc_per_node 2 engine_mixer_zero2.py --epochs 2
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import tempfile

import deepspeed
import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


class MixerBlock(nn.Module):
    def __init__(self, tokens: int, dim: int) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.token_mlp = nn.Sequential(nn.Linear(tokens, 2 * tokens), nn.GELU(), nn.Linear(2 * tokens, tokens))
        self.norm2 = nn.LayerNorm(dim)
        self.channel_mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.token_mlp(self.norm1(x).transpose(1, 2)).transpose(1, 2)
        return x + self.channel_mlp(self.norm2(x))


class Mixer(nn.Module):
    def __init__(self, image: int = 16, patch: int = 4, dim: int = 48, depth: int = 3, classes: int = 6) -> None:
        super().__init__()
        tokens = (image // patch) ** 2
        self.stem = nn.Conv2d(3, dim, kernel_size=patch, stride=patch)
        self.blocks = nn.Sequential(*[MixerBlock(tokens, dim) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x).flatten(2).transpose(1, 2)
        x = self.norm(self.blocks(x))
        return self.head(x.mean(dim=1))


def synthetic_split(n: int, seed: int, classes: int = 6) -> TensorDataset:
    g = torch.Generator().manual_seed(seed)
    prototypes = torch.randn(classes, 3, 16, 16, generator=torch.Generator().manual_seed(7))
    labels = torch.randint(0, classes, (n,), generator=g)
    images = prototypes[labels] + 0.8 * torch.randn(n, 3, 16, 16, generator=g)
    return TensorDataset(images, labels)


def mixup(x: torch.Tensor, y: torch.Tensor, gen: torch.Generator, alpha: float, classes: int):
    lam = float(np.random.default_rng(int(torch.randint(0, 2**31, (1,), generator=gen))).beta(alpha, alpha))
    perm = torch.randperm(x.size(0), generator=gen)
    targets = F.one_hot(y, classes).float()
    return lam * x + (1 - lam) * x[perm], lam * targets + (1 - lam) * targets[perm]


def param_groups(model: nn.Module, weight_decay: float):
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if p.ndim < 2 or "norm" in name else decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--micro_batch", type=int, default=16)
    parser.add_argument("--accum", type=int, default=2)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--seed", type=int, default=17)
    parser.add_argument("--init_from", default=None, help="first-stage checkpoint (written here if absent)")
    parser.add_argument("--local_rank", type=int, default=-1)
    args = parser.parse_args()

    deepspeed.init_distributed(dist_backend="gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(args.seed)
    random.seed(args.seed)
    rank_seed = args.seed + 1000 * rank  # augmentation differs per rank
    aug_gen = torch.Generator().manual_seed(rank_seed)

    workdir = tempfile.mkdtemp(prefix="mixer_ds_") if rank == 0 else None
    shared = [workdir]
    dist.broadcast_object_list(shared, src=0)
    workdir = shared[0]
    init_from = args.init_from or os.path.join(workdir, "stage1.pt")
    if rank == 0 and not os.path.exists(init_from):
        torch.manual_seed(4242)
        torch.save(Mixer().state_dict(), init_from)
        torch.manual_seed(args.seed)
    dist.barrier()

    model = Mixer()
    state = torch.load(init_from, map_location="cpu")  # fault mixer_late_load: -
    model.load_state_dict(state)  # fault mixer_late_load: -

    train_set = synthetic_split(512, seed=1)
    val_set = synthetic_split(128, seed=2)
    sampler = DistributedSampler(train_set, num_replicas=world, rank=rank, shuffle=True, seed=args.seed)  # fault mixer_sampler_rank_seed: sampler = DistributedSampler(train_set, num_replicas=world, rank=rank, shuffle=True, seed=rank_seed)
    loader = DataLoader(train_set, batch_size=args.micro_batch, sampler=sampler, drop_last=True)
    val_loader = DataLoader(
        val_set, batch_size=32, sampler=DistributedSampler(val_set, num_replicas=world, rank=rank, shuffle=False)
    )

    updates_per_epoch = len(loader) // args.accum
    total_updates = updates_per_epoch * args.epochs
    warmup = max(1, total_updates // 5)
    optimizer = torch.optim.AdamW(param_groups(model, 0.05), lr=args.lr, betas=(0.9, 0.99))
    scheduler = torch.optim.lr_scheduler.SequentialLR(
        optimizer,
        [
            torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=0.1, total_iters=warmup),
            torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=total_updates - warmup, eta_min=1e-5),
        ],
        milestones=[warmup],
    )
    ds_config = {
        "train_micro_batch_size_per_gpu": args.micro_batch,
        "gradient_accumulation_steps": args.accum,
        "gradient_clipping": 1.0,
        "zero_optimization": {
            "stage": 2,
            "overlap_comm": False,
            "contiguous_gradients": True,
            "reduce_bucket_size": 200000,
            "allgather_bucket_size": 200000,
        },
        "steps_per_print": 10_000,
        "wall_clock_breakdown": False,
    }
    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, lr_scheduler=scheduler, config=ds_config)  # fault mixer_late_load: = || state = torch.load(init_from, map_location="cpu") || engine.module.load_state_dict(state)

    for epoch in range(args.epochs):
        engine.train()
        sampler.set_epoch(epoch)
        running, seen = 0.0, 0
        for images, labels in loader:
            images, labels = images.to(engine.device), labels.to(engine.device)
            mixed, soft = mixup(images, labels, aug_gen, alpha=0.4, classes=6)
            logits = engine(mixed)
            loss = torch.sum(-soft * F.log_softmax(logits, dim=-1), dim=-1).mean()
            engine.backward(loss)
            engine.step()
            running += loss.item()
            seen += 1
        mean_loss = torch.tensor([running / max(seen, 1)])
        dist.all_reduce(mean_loss)
        mean_loss /= world

        engine.eval()
        correct = torch.zeros(2)
        with torch.no_grad():
            for images, labels in val_loader:
                pred = engine(images.to(engine.device)).argmax(-1)
                correct += torch.tensor([(pred == labels).sum().item(), labels.numel()], dtype=torch.float)
        dist.all_reduce(correct)
        if rank == 0:
            print(
                f"epoch {epoch}: train loss {mean_loss.item():.4f} "
                f"val acc {correct[0].item() / correct[1].item():.3f} lr {engine.get_lr()[0]:.2e} "
                f"updates {engine.global_steps}",
                flush=True,
            )

    engine.save_checkpoint(os.path.join(workdir, "ckpt"), tag="final")
    del engine, optimizer, scheduler
    gc.collect()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

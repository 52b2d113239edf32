"""Tiny ViT on synthetic textures: mixup / cutmix, label smoothing, bf16 autocast, accumulation.

torchrun --nproc_per_node 2 vit_mixup.py
"""

import gc
import math
from contextlib import nullcontext

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

CFG = {
    "seed": 17,
    "image": 16,
    "patch": 4,
    "dim": 48,
    "depth": 2,
    "heads": 4,
    "classes": 5,
    "n_train": 256,
    "n_val": 64,
    "micro_batch": 8,
    "accum": 2,
    "epochs": 4,
    "base_lr": 5e-4,
    "ref_batch": 32,  # the global batch base_lr was tuned at
    "warmup_epochs": 1,
    "weight_decay": 0.05,
    "smoothing": 0.1,
    "mixup_alpha": 0.4,
    "cutmix_prob": 0.5,
    "clip": 1.0,
}


def make_textures(n, cfg, seed):
    """Class k is a sinusoidal grating at frequency k+1, with a random phase and noise."""
    g = torch.Generator().manual_seed(seed)
    size = cfg["image"]
    labels = torch.randint(0, cfg["classes"], (n,), generator=g)
    xs = torch.linspace(0, 2 * math.pi, size)
    phase = torch.rand(n, 1, 1, generator=g) * 2 * math.pi
    freq = (labels + 1).float().view(n, 1, 1)
    grating = torch.sin(freq * xs.view(1, 1, size) + phase).expand(n, size, size)
    images = grating.unsqueeze(1).repeat(1, 3, 1, 1)
    images = images + 0.5 * torch.randn(n, 3, size, size, generator=g)
    return TensorDataset(images, labels)


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))

    def forward(self, x):
        h = self.norm1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


class TinyViT(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        dim = cfg["dim"]
        n_patches = (cfg["image"] // cfg["patch"]) ** 2
        self.embed = nn.Conv2d(3, dim, cfg["patch"], stride=cfg["patch"])
        self.cls = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos = nn.Parameter(torch.randn(1, n_patches + 1, dim) * 0.02)
        self.blocks = nn.Sequential(*[Block(dim, cfg["heads"]) for _ in range(cfg["depth"])])
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, cfg["classes"])

    def forward(self, x):
        x = self.embed(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
        x = self.norm(self.blocks(x))
        return self.head(x[:, 0])


def mix_batch(x, y, cfg, rng, gen):
    """Mixup or cutmix with a partner from the same batch; returns the two targets and lam."""
    lam = float(rng.beta(cfg["mixup_alpha"], cfg["mixup_alpha"]))
    perm = torch.randperm(x.shape[0], generator=gen)
    if rng.random() < cfg["cutmix_prob"]:
        size = x.shape[-1]
        cut = int(size * math.sqrt(1.0 - lam))
        cy, cx = rng.integers(0, size, 2)
        y0, y1 = max(cy - cut // 2, 0), min(cy + cut // 2, size)
        x0, x1 = max(cx - cut // 2, 0), min(cx + cut // 2, size)
        x = x.clone()
        x[:, :, y0:y1, x0:x1] = x[perm][:, :, y0:y1, x0:x1]
        lam = 1.0 - (y1 - y0) * (x1 - x0) / (size * size)
    else:
        x = lam * x + (1.0 - lam) * x[perm]
    return x, y, y[perm], lam


def warmup_cosine(warmup, total):
    def factor(step):
        if step < warmup:
            return (step + 1) / warmup
        progress = (step - warmup) / max(1, total - warmup)
        return 0.5 * (1.0 + math.cos(math.pi * progress))

    return factor


@torch.no_grad()
def evaluate(model, loader):
    model.eval()
    stats = torch.zeros(3)
    for x, y in loader:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = model(x)
        loss = F.cross_entropy(logits.float(), y, reduction="sum")
        stats += torch.tensor([loss.item(), (logits.argmax(1) == y).sum().item(), y.numel()])
    dist.all_reduce(stats)
    model.train()
    return (stats[0] / stats[2]).item(), (stats[1] / stats[2]).item()


def main():
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(1)
    cfg = dict(CFG)
    torch.manual_seed(cfg["seed"])

    train_set = make_textures(cfg["n_train"], cfg, seed=0)
    val_set = make_textures(cfg["n_val"], cfg, seed=1)
    sampler = DistributedSampler(train_set, shuffle=True, seed=cfg["seed"], drop_last=True)
    train_loader = DataLoader(
        train_set, batch_size=cfg["micro_batch"], sampler=sampler, drop_last=True
    )
    val_loader = DataLoader(
        val_set, batch_size=32, sampler=DistributedSampler(val_set, shuffle=False)
    )

    global_batch = cfg["micro_batch"] * cfg["accum"] * world
    cfg["lr"] = cfg["base_lr"] * global_batch / cfg["ref_batch"]  # fmt: skip  # fault vit_lr_micro_ref: cfg["lr"] = cfg["base_lr"] * global_batch / cfg["micro_batch"]
    updates_per_epoch = len(train_loader) // cfg["accum"]
    total_updates = cfg["epochs"] * updates_per_epoch
    warmup_updates = cfg["warmup_epochs"] * updates_per_epoch  # fmt: skip  # fault vit_warmup_units: warmup_updates = cfg["warmup_epochs"]

    model = DDP(TinyViT(cfg))
    decay = [p for n, p in model.named_parameters() if p.ndim > 1 and "pos" not in n]
    no_decay = [p for n, p in model.named_parameters() if p.ndim <= 1 or "pos" in n]
    optimizer = torch.optim.AdamW(
        [
            {"params": decay, "weight_decay": cfg["weight_decay"]},
            {"params": no_decay, "weight_decay": 0.0},
        ],
        lr=cfg["lr"],
        betas=(0.9, 0.999),
    )
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, warmup_cosine(warmup_updates, total_updates)
    )
    # augmentation draws differ per rank; the model init above is shared through the seed
    rng = np.random.default_rng(cfg["seed"] + 1000 * rank)  # fmt: skip  # fault vit_mix_same_seed: rng = np.random.default_rng(cfg["seed"])
    gen = torch.Generator().manual_seed(cfg["seed"] + 1000 * rank)  # fmt: skip  # fault vit_mix_same_seed: gen = torch.Generator().manual_seed(cfg["seed"])

    update = 0
    for epoch in range(cfg["epochs"]):
        sampler.set_epoch(epoch)
        running = torch.zeros(2)
        optimizer.zero_grad(set_to_none=True)
        for i, (x, y) in enumerate(train_loader):
            last = (i + 1) % cfg["accum"] == 0
            x, ya, yb, lam = mix_batch(x, y, cfg, rng, gen)
            with model.no_sync() if not last else nullcontext():  # fmt: skip  # fault vit_zero_grad_micro: optimizer.zero_grad(set_to_none=True) || =
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    logits = model(x)
                logits = logits.float()
                loss = lam * F.cross_entropy(logits, ya, label_smoothing=cfg["smoothing"]) + (
                    1.0 - lam
                ) * F.cross_entropy(logits, yb, label_smoothing=cfg["smoothing"])
                (loss / cfg["accum"]).backward()
            running += torch.tensor([loss.item(), 1.0])
            if not last:
                continue
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg["clip"])
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            update += 1
            if update % 4 == 0:
                dist.all_reduce(running)
                if rank == 0:
                    print(
                        f"epoch {epoch} update {update}/{total_updates} "
                        f"loss {running[0] / running[1]:.4f} lr {scheduler.get_last_lr()[0]:.2e} "
                        f"grad_norm {grad_norm:.3f}",
                        flush=True,
                    )
                running.zero_()
        val_loss, val_acc = evaluate(model, val_loader)
        if rank == 0:
            print(f"epoch {epoch} val_loss {val_loss:.4f} val_acc {val_acc:.3f}", flush=True)

    del model, optimizer, scheduler
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

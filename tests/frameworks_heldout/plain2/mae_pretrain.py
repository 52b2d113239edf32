"""Masked-autoencoder pretraining of a tiny ViT on procedurally generated textures.

fp16 autocast on CPU with a GradScaler, AdamW with decay / no-decay groups, half-cycle
cosine schedule with linear warmup set by hand every iteration (MAE recipe).
"""

import gc
import math
import os
import tempfile
from dataclasses import dataclass

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset, DistributedSampler


@dataclass
class PretrainConfig:
    img: int = 16
    patch: int = 4
    dim: int = 48
    depth: int = 2
    heads: int = 4
    dec_dim: int = 32
    mask_ratio: float = 0.75
    batch_size: int = 16
    epochs: int = 2
    blr: float = 1e-2
    min_lr: float = 1e-5
    warmup_iters: int = 4  # fault mae_warmup_one_iter: warmup_iters: int = 1
    weight_decay: float = 0.05
    seed: int = 0


class Textures(Dataset):
    def __init__(self, n, size, seed):
        g = torch.Generator().manual_seed(seed)
        coords = torch.linspace(0, 2 * math.pi, size)
        yy, xx = torch.meshgrid(coords, coords, indexing="ij")
        self.data = []
        for _ in range(n):
            fx, fy, phase = torch.rand(3, generator=g) * torch.tensor([4.0, 4.0, 6.28])
            base = torch.sin(fx * xx + phase) * torch.cos(fy * yy)
            colours = torch.rand(3, 1, 1, generator=g)
            self.data.append(colours * base + 0.1 * torch.randn(3, size, size, generator=g))

    def __len__(self):
        return len(self.data)

    def __getitem__(self, i):
        return self.data[i]


def patchify(imgs, p):
    b, c, h, w = imgs.shape
    x = imgs.reshape(b, c, h // p, p, w // p, p)
    return x.permute(0, 2, 4, 3, 5, 1).reshape(b, (h // p) * (w // p), p * p * c)


class MAE(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        n = (cfg.img // cfg.patch) ** 2
        patch_dim = cfg.patch * cfg.patch * 3
        self.patch = cfg.patch
        self.mask_ratio = cfg.mask_ratio
        self.embed = nn.Linear(patch_dim, cfg.dim)
        self.pos = nn.Parameter(torch.zeros(1, n, cfg.dim))
        layer = nn.TransformerEncoderLayer(cfg.dim, cfg.heads, 2 * cfg.dim, dropout=0.0, batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, cfg.depth, enable_nested_tensor=False)
        self.enc_norm = nn.LayerNorm(cfg.dim)
        self.to_dec = nn.Linear(cfg.dim, cfg.dec_dim)
        self.mask_token = nn.Parameter(torch.zeros(1, 1, cfg.dec_dim))
        self.dec_pos = nn.Parameter(torch.zeros(1, n, cfg.dec_dim))
        dec_layer = nn.TransformerEncoderLayer(cfg.dec_dim, 2, 2 * cfg.dec_dim, dropout=0.0, batch_first=True, norm_first=True)
        self.decoder = nn.TransformerEncoder(dec_layer, 1, enable_nested_tensor=False)
        self.head = nn.Linear(cfg.dec_dim, patch_dim)
        nn.init.trunc_normal_(self.pos, std=0.02)
        nn.init.trunc_normal_(self.dec_pos, std=0.02)
        nn.init.normal_(self.mask_token, std=0.02)

    def forward(self, imgs):
        target = patchify(imgs, self.patch)
        b, n, _ = target.shape
        keep = int(n * (1 - self.mask_ratio))
        noise = torch.rand(b, n)
        ids_shuffle = noise.argsort(1)
        ids_restore = ids_shuffle.argsort(1)
        ids_keep = ids_shuffle[:, :keep]

        x = self.embed(target) + self.pos
        x = torch.gather(x, 1, ids_keep[..., None].expand(-1, -1, x.shape[-1]))
        x = self.enc_norm(self.encoder(x))

        x = self.to_dec(x)
        x = torch.cat([x, self.mask_token.expand(b, n - keep, -1).to(x.dtype)], 1)
        x = torch.gather(x, 1, ids_restore[..., None].expand(-1, -1, x.shape[-1]))
        pred = self.head(self.decoder(x + self.dec_pos))

        mask = torch.ones(b, n)
        mask[:, :keep] = 0
        mask = torch.gather(mask, 1, ids_restore)
        mean, var = target.mean(-1, keepdim=True), target.var(-1, keepdim=True)
        target = (target - mean) / (var + 1e-6).sqrt()
        loss = ((pred.float() - target) ** 2).mean(-1)
        return (loss * mask).sum() / mask.sum()


def param_groups(model, weight_decay):
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if p.ndim < 2 or "pos" in name or "token" in name:
            no_decay.append(p)
        else:
            decay.append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def lr_at(it, total, peak, cfg):
    if it < cfg.warmup_iters:
        return peak * (it + 1) / cfg.warmup_iters
    progress = (it - cfg.warmup_iters) / max(1, total - cfg.warmup_iters)
    return cfg.min_lr + (peak - cfg.min_lr) * 0.5 * (1.0 + math.cos(math.pi * progress))


def main():
    cfg = PretrainConfig()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    world = dist.get_world_size()
    torch.manual_seed(cfg.seed)
    model = MAE(cfg)
    # masks are drawn from the global generator: different on every rank
    torch.manual_seed(cfg.seed + rank)

    data = Textures(256, cfg.img, seed=123)
    sampler = DistributedSampler(data, num_replicas=world, rank=rank, shuffle=True, seed=cfg.seed)
    loader = DataLoader(data, batch_size=cfg.batch_size, sampler=sampler, drop_last=True)

    model = DDP(model)
    eff_batch = cfg.batch_size * world
    peak_lr = cfg.blr * eff_batch / 256
    optimizer = torch.optim.AdamW(param_groups(model, cfg.weight_decay), lr=peak_lr, betas=(0.9, 0.95))
    scaler = torch.amp.GradScaler("cpu")  # fault mae_no_scaler: -
    total_iters = cfg.epochs * len(loader)

    it = 0
    for epoch in range(cfg.epochs):
        sampler.set_epoch(epoch)
        epoch_loss = torch.zeros(2, dtype=torch.float64)
        for imgs in loader:
            lr = lr_at(it, total_iters, peak_lr, cfg)
            for group in optimizer.param_groups:
                group["lr"] = lr
            with torch.autocast("cpu", dtype=torch.float16):
                loss = model(imgs)
            optimizer.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()  # fault mae_no_scaler: loss.backward()
            scaler.step(optimizer)  # fault mae_no_scaler: optimizer.step()
            scaler.update()  # fault mae_no_scaler: -
            epoch_loss += torch.tensor([loss.item(), 1.0], dtype=torch.float64)
            it += 1
        dist.all_reduce(epoch_loss)
        if rank == 0:
            print(f"epoch {epoch} | loss {epoch_loss[0] / epoch_loss[1]:.4f} | lr {lr:.3e} | scale {scaler.get_scale():.0f}")  # fault mae_no_scaler: print(f"epoch {epoch} | loss {epoch_loss[0] / epoch_loss[1]:.4f} | lr {lr:.3e}")

    if rank == 0:
        decoder_parts = ("decoder", "to_dec", "head", "mask_token", "dec_pos")
        encoder_state = {k: v for k, v in model.module.state_dict().items() if not k.startswith(decoder_parts)}
        with tempfile.TemporaryDirectory() as out:
            torch.save(encoder_state, os.path.join(out, "mae_encoder.pt"))
            print(f"saved {len(encoder_state)} encoder tensors")
    del model
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

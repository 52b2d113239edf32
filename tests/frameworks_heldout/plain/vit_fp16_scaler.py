"""Patch-transformer image classifier with fp16 autocast and a GradScaler, on CPU ranks.
Optimiser as in the ViT fine-tuning recipe: SGD with momentum, global norm clipping at 1.

torchrun --nproc_per_node 2 vit_fp16_scaler.py
"""

import argparse
import gc
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


class PatchEmbed(nn.Module):
    def __init__(self, patch=4, in_ch=1, dim=48):
        super().__init__()
        self.proj = nn.Conv2d(in_ch, dim, kernel_size=patch, stride=patch)

    def forward(self, x):
        return self.proj(x).flatten(2).transpose(1, 2)


class TinyViT(nn.Module):
    def __init__(self, img=16, patch=4, dim=48, depth=2, heads=4, n_classes=5):
        super().__init__()
        self.patch_embed = PatchEmbed(patch, 1, dim)
        n_patches = (img // patch) ** 2
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos = nn.Parameter(torch.randn(1, n_patches + 1, dim) * 0.02)
        enc = nn.TransformerEncoderLayer(
            dim, heads, 2 * dim, dropout=0.0, batch_first=True, norm_first=True
        )
        self.encoder = nn.TransformerEncoder(enc, depth, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, n_classes)

    def forward(self, x):
        x = self.patch_embed(x)
        cls = self.cls_token.expand(x.size(0), -1, -1)
        x = torch.cat([cls, x], dim=1) + self.pos
        x = self.encoder(x)
        return self.head(self.norm(x[:, 0]))


def stripes_dataset(n, seed, n_classes=5):
    """Label = orientation/frequency of a stripe pattern, plus noise."""
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, n_classes, (n,), generator=g)
    coords = torch.arange(16, dtype=torch.float32)
    yy, xx = torch.meshgrid(coords, coords, indexing="ij")
    patterns = torch.stack(
        [torch.sin((k + 1) * 0.4 * (xx + (k % 2) * yy)) for k in range(n_classes)]
    )
    images = patterns[labels].unsqueeze(1) + 0.5 * torch.randn(n, 1, 16, 16, generator=g)
    return TensorDataset(images, labels)


def main():
    parser = argparse.ArgumentParser(description="tiny ViT, fp16 AMP")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=0.03)
    parser.add_argument("--clip", type=float, default=1.0)
    args = parser.parse_args()

    dist.init_process_group(backend="gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)

    ds = stripes_dataset(256, seed=0)
    sampler = DistributedSampler(ds, shuffle=True)
    loader = DataLoader(ds, batch_size=args.batch_size, sampler=sampler, drop_last=True)

    model = DDP(TinyViT())
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(
        optimizer, T_max=args.epochs * len(loader)
    )
    scaler = torch.amp.GradScaler("cpu")

    it = 0
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        start = time.perf_counter()
        for images, targets in loader:
            optimizer.zero_grad(set_to_none=True)
            with torch.autocast(device_type="cpu", dtype=torch.float16):
                outputs = model(images)
                loss = F.cross_entropy(outputs, targets)
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)  # fault vit_clip_scaled: -
            grad_norm = nn.utils.clip_grad_norm_(model.parameters(), args.clip)
            scaler.step(optimizer)
            scaler.update()
            scheduler.step()
            it += 1

            stats = torch.tensor(
                [loss.item(), (outputs.argmax(1) == targets).float().mean().item()]
            )
            dist.all_reduce(stats)
            stats /= world
            if rank == 0:
                print(
                    f"ep {epoch} it {it:02d} loss {stats[0]:.4f} acc {stats[1]:.3f} "
                    f"gnorm {grad_norm:.3f} scale {scaler.get_scale():.0f}"
                )
        if rank == 0:
            print(f"epoch {epoch} done in {time.perf_counter() - start:.2f}s")

    del model
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

"""Small U-Net segmenting synthetic shapes (background / disc / square), DDP on gloo.

Run: python -m torch.distributed.run --nproc_per_node 2 unet_shapes.py --epochs 2
"""

import argparse
import gc

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

NUM_CLASSES = 3


def get_args():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=2, help="images per process")
    p.add_argument("--image-size", type=int, default=32)
    p.add_argument("--num-images", type=int, default=32)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--seed", type=int, default=1234)
    return p.parse_args()


class ShapesDataset(Dataset):
    def __init__(self, n, size, seed):
        g = torch.Generator().manual_seed(seed)
        yy, xx = torch.meshgrid(torch.arange(size), torch.arange(size), indexing="ij")
        self.images, self.masks = [], []
        for _ in range(n):
            mask = torch.zeros(size, size, dtype=torch.long)
            cx, cy = torch.randint(6, size - 6, (2,), generator=g).tolist()
            r = int(torch.randint(3, 7, (1,), generator=g))
            mask[(xx - cx) ** 2 + (yy - cy) ** 2 <= r * r] = 1
            sx, sy = torch.randint(0, size - 8, (2,), generator=g).tolist()
            mask[sy : sy + 7, sx : sx + 7] = 2
            img = torch.stack([(mask == 1).float(), (mask == 2).float(), torch.zeros(size, size)])
            img = img * 0.8 + 0.3 * torch.randn(3, size, size, generator=g)
            self.images.append(img)
            self.masks.append(mask)

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        return self.images[i], self.masks[i]


def norm(channels):
    return nn.GroupNorm(4, channels)  # fault unet_batchnorm: return nn.BatchNorm2d(channels)


class DoubleConv(nn.Sequential):
    def __init__(self, cin, cout):
        super().__init__(
            nn.Conv2d(cin, cout, 3, padding=1, bias=False),
            norm(cout),
            nn.ReLU(inplace=True),
            nn.Conv2d(cout, cout, 3, padding=1, bias=False),
            norm(cout),
            nn.ReLU(inplace=True),
        )


class UNet(nn.Module):
    def __init__(self, in_ch=3, n_classes=NUM_CLASSES, base=8):
        super().__init__()
        self.enc1 = DoubleConv(in_ch, base)
        self.enc2 = DoubleConv(base, base * 2)
        self.bottleneck = DoubleConv(base * 2, base * 4)
        self.up2 = nn.ConvTranspose2d(base * 4, base * 2, 2, stride=2)
        self.dec2 = DoubleConv(base * 4, base * 2)
        self.up1 = nn.ConvTranspose2d(base * 2, base, 2, stride=2)
        self.dec1 = DoubleConv(base * 2, base)
        self.out = nn.Conv2d(base, n_classes, 1)

    def forward(self, x):
        e1 = self.enc1(x)
        e2 = self.enc2(F.max_pool2d(e1, 2))
        b = self.bottleneck(F.max_pool2d(e2, 2))
        d2 = self.dec2(torch.cat([self.up2(b), e2], 1))
        d1 = self.dec1(torch.cat([self.up1(d2), e1], 1))
        return self.out(d1)


def random_flip_rotate(images, masks, gen):
    if torch.rand(1, generator=gen).item() < 0.5:
        images, masks = images.flip(-1), masks.flip(-1)
    k = int(torch.randint(4, (1,), generator=gen))
    return images.rot90(k, (-2, -1)), masks.rot90(k, (-2, -1))


def dice_loss(logits, target, eps=1.0):
    probs = logits.softmax(1)
    onehot = F.one_hot(target, NUM_CLASSES).permute(0, 3, 1, 2).float()
    inter = (probs * onehot).sum((0, 2, 3))
    denom = probs.sum((0, 2, 3)) + onehot.sum((0, 2, 3))
    return 1 - ((2 * inter + eps) / (denom + eps)).mean()


@torch.no_grad()
def mean_iou(model, loader):
    model.eval()
    inter = torch.zeros(NUM_CLASSES)
    union = torch.zeros(NUM_CLASSES)
    for images, masks in loader:
        pred = model(images).argmax(1)
        for c in range(NUM_CLASSES):
            inter[c] += ((pred == c) & (masks == c)).sum()
            union[c] += ((pred == c) | (masks == c)).sum()
    dist.all_reduce(inter)
    dist.all_reduce(union)
    model.train()
    return (inter / union.clamp(min=1)).mean().item()


def main():
    args = get_args()
    dist.init_process_group(backend="gloo")
    rank = dist.get_rank()
    torch.manual_seed(args.seed)

    train_ds = ShapesDataset(args.num_images, args.image_size, seed=args.seed)
    val_ds = ShapesDataset(16, args.image_size, seed=args.seed + 1)
    sampler = DistributedSampler(train_ds, shuffle=True, seed=args.seed)  # fault unet_sampler_rank_seed: sampler = DistributedSampler(train_ds, shuffle=True, seed=args.seed + rank)
    train_dl = DataLoader(train_ds, batch_size=args.batch_size, sampler=sampler, drop_last=True)
    val_dl = DataLoader(val_ds, batch_size=8, sampler=DistributedSampler(val_ds, shuffle=False))

    model = DistributedDataParallel(UNet())
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    total_iters = args.epochs * len(train_dl)
    scheduler = torch.optim.lr_scheduler.PolynomialLR(optimizer, total_iters=total_iters, power=0.9)
    aug_gen = torch.Generator().manual_seed(args.seed + 1000 * (rank + 1))

    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        loss_sum, batches = torch.zeros(2), 0
        for images, masks in train_dl:
            images, masks = random_flip_rotate(images, masks, aug_gen)
            logits = model(images)
            ce = F.cross_entropy(logits, masks)
            dl = dice_loss(logits, masks)
            loss = ce + dl
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            scheduler.step()
            loss_sum += torch.stack([ce.detach(), dl.detach()])
            batches += 1
        loss_sum /= batches * dist.get_world_size()
        dist.all_reduce(loss_sum)
        miou = mean_iou(model, val_dl)
        if rank == 0:
            print(
                f"[epoch {epoch + 1}/{args.epochs}] ce={loss_sum[0]:.4f} dice={loss_sum[1]:.4f} "
                f"mIoU={miou:.3f} lr={scheduler.get_last_lr()[0]:.2e}"
            )

    del model
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

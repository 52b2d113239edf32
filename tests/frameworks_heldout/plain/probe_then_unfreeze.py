"""Linear probe, then full fine-tuning: the conv backbone is frozen for the first
--freeze_epochs epochs and unfrozen afterwards (lower lr for the backbone).

    torchrun --nproc_per_node 2 probe_then_unfreeze.py --epochs 3 --freeze_epochs 1
"""

import argparse
import gc

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


class Backbone(nn.Module):
    def __init__(self, width=24):
        super().__init__()
        self.stem = nn.Conv2d(3, width, 3, stride=2, padding=1)
        self.block = nn.Sequential(
            nn.Conv2d(width, width, 3, padding=1), nn.GELU(), nn.Conv2d(width, width, 3, padding=1)
        )
        self.out_dim = width

    def forward(self, x):
        x = F.gelu(self.stem(x))
        x = x + self.block(x)
        return x.mean(dim=(2, 3))


class Net(nn.Module):
    def __init__(self, n_classes=6):
        super().__init__()
        self.backbone = Backbone()
        self.fc = nn.Linear(self.backbone.out_dim, n_classes)

    def forward(self, x):
        return self.fc(self.backbone(x))


def set_backbone_trainable(net, trainable):
    for p in net.backbone.parameters():
        p.requires_grad = trainable


def fake_images(n, n_classes=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, n_classes, (n,), generator=g)
    base = torch.randn(n_classes, 3, 12, 12, generator=torch.Generator().manual_seed(123))
    x = base[y] + torch.randn(n, 3, 12, 12, generator=g)
    return TensorDataset(x, y)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--freeze_epochs", type=int, default=1)
    parser.add_argument("--batch_size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=3e-3)
    args = parser.parse_args()

    dist.init_process_group("gloo")
    rank, world_size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)

    ds = fake_images(192)
    sampler = DistributedSampler(ds, shuffle=True)
    loader = DataLoader(ds, batch_size=args.batch_size, sampler=sampler)

    net = Net()
    set_backbone_trainable(net, False)
    model = DDP(net)
    optimizer = torch.optim.AdamW(
        [
            {"params": net.fc.parameters(), "lr": args.lr},
            {"params": net.backbone.parameters(), "lr": args.lr * 0.3},
        ]
    )

    step = 0
    for epoch in range(args.epochs):
        if epoch == args.freeze_epochs:
            set_backbone_trainable(net, True)
            if rank == 0:
                print(f"epoch {epoch}: unfreezing backbone")
        sampler.set_epoch(epoch)
        for x, y in loader:
            out = model(x)
            loss = F.cross_entropy(out, y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
            mean_loss = loss.detach().clone()
            dist.all_reduce(mean_loss)
            mean_loss /= world_size
            if rank == 0 and step % 3 == 0:
                n_trainable = sum(p.numel() for p in net.parameters() if p.requires_grad)
                print(
                    f"epoch {epoch} step {step} loss {mean_loss.item():.4f} trainable {n_trainable}"
                )

    del model
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

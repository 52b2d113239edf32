"""Point-set shape classifier: DDP, then torch.compile (eager backend), run by a Trainer.

Each sample is a variable-size 2-D point set drawn from one of five outlines; a custom
collate pads a batch to its largest set and returns a mask. A PointNet-style shared MLP with
a masked max-pool classifies it. Rotation, scale and jitter are drawn per sample from a
generator seeded per rank. The loop lives in points_trainer.py.

Launch: torchrun --nproc_per_node 2 points_compiled.py
"""

from __future__ import annotations

import argparse
import gc
import math

import torch
import torch.distributed as dist
from points_trainer import Trainer, TrainerConfig
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset, DistributedSampler

SHAPES = 5


def outline(kind: int, n: int, g: torch.Generator) -> torch.Tensor:
    u = torch.rand(n, generator=g)
    if kind == 0:  # circle
        a = 2 * math.pi * u
        return torch.stack([a.cos(), a.sin()], 1)
    if kind == 4:  # a straight segment
        return torch.stack([2 * u - 1, torch.zeros(n)], 1)
    corners = {1: 3, 2: 4, 3: 6}[kind]  # triangle, square, hexagon
    verts = torch.tensor(
        [
            [math.cos(2 * math.pi * k / corners), math.sin(2 * math.pi * k / corners)]
            for k in range(corners + 1)
        ]
    )
    pos = u * corners
    k = pos.floor().long()
    frac = (pos - k)[:, None]
    return verts[k] * (1 - frac) + verts[k + 1] * frac


class PointSets(Dataset):
    def __init__(self, n: int, seed: int, aug: torch.Generator | None) -> None:
        g = torch.Generator().manual_seed(seed)
        self.labels = torch.randint(0, SHAPES, (n,), generator=g)
        self.sets = [
            outline(int(c), int(torch.randint(12, 41, (1,), generator=g)), g) for c in self.labels
        ]
        self.aug = aug

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int):
        pts = self.sets[i]
        if self.aug is not None:
            a = (float(torch.rand(1, generator=self.aug)) - 0.5) * 0.6
            rot = torch.tensor([[math.cos(a), -math.sin(a)], [math.sin(a), math.cos(a)]])
            scale = 0.8 + 0.4 * float(torch.rand(1, generator=self.aug))
            pts = pts @ rot.T * scale + 0.02 * torch.randn(pts.shape, generator=self.aug)
        return pts, self.labels[i]


def pad_collate(batch):
    longest = max(p.shape[0] for p, _ in batch)
    longest = -(-longest // 8) * 8  # a few padded lengths only, so the compiled graph is reused
    points = torch.zeros(len(batch), longest, 2)
    mask = torch.zeros(len(batch), longest, dtype=torch.bool)
    for i, (p, _) in enumerate(batch):
        points[i, : p.shape[0]] = p
        mask[i, : p.shape[0]] = True
    return points, mask, torch.stack([y for _, y in batch])


class PointNet(nn.Module):
    def __init__(self, width: int = 64) -> None:
        super().__init__()
        self.local = nn.Sequential(
            nn.Linear(2, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU()
        )
        self.glob = nn.Sequential(nn.Linear(2 * width, width), nn.ReLU(), nn.Linear(width, SHAPES))

    def forward(self, points: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        h = self.local(points)
        pooled_max = h.masked_fill(~mask[..., None], float("-inf")).amax(dim=1)
        pooled_mean = (h * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)
        return self.glob(torch.cat([pooled_max, pooled_mean], dim=1))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)

    aug = torch.Generator().manual_seed(args.seed * 100 + rank)
    train = PointSets(512, seed=args.seed + 1, aug=aug)
    val = PointSets(128, seed=args.seed + 2, aug=None)
    train_sampler = DistributedSampler(train, shuffle=True, seed=args.seed)  # fmt: skip  # fault points_sampler_seed: train_sampler = DistributedSampler(train, shuffle=True, seed=args.seed + rank)
    val_sampler = DistributedSampler(val, shuffle=False)
    train_loader = DataLoader(train, args.batch_size, sampler=train_sampler, collate_fn=pad_collate)
    val_loader = DataLoader(val, 64, sampler=val_sampler, collate_fn=pad_collate)

    net = PointNet()
    ddp_model = DDP(net)
    model = torch.compile(ddp_model, backend="eager")  # fmt: skip  # fault points_compile_module: model = torch.compile(ddp_model.module, backend="eager")
    opt = torch.optim.SGD(ddp_model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
    sched = torch.optim.lr_scheduler.MultiStepLR(opt, milestones=[2], gamma=0.2)

    trainer = Trainer(
        model,
        ddp_model.parameters(),
        opt,
        sched,
        train_loader,
        train_sampler,
        val_loader,
        TrainerConfig(epochs=args.epochs),
    )
    trainer.fit(ddp_model.train)

    del trainer, model, ddp_model
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

"""SimCLR-style contrastive pretraining of an MLP encoder on synthetic feature vectors.

Two noisy views of each sample go through one shared encoder; InfoNCE over the local batch.
    torchrun --nproc_per_node=2 siamese_contrastive.py
"""

import argparse
import gc

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

IN_DIM = 32


class Encoder(nn.Module):
    def __init__(self, in_dim=IN_DIM, hidden=128, out_dim=32):
        super().__init__()
        self.backbone = nn.Sequential(
            nn.Linear(in_dim, hidden),
            nn.LayerNorm(hidden),
            nn.GELU(),
            nn.Linear(hidden, hidden),
            nn.GELU(),
        )
        self.projector = nn.Sequential(
            nn.Linear(hidden, hidden), nn.GELU(), nn.Linear(hidden, out_dim)
        )

    def embed(self, x):
        return F.normalize(self.projector(self.backbone(x)), dim=-1)

    def forward(self, view_a, view_b):
        return self.embed(view_a), self.embed(view_b)


def info_nce(z_a, z_b, temperature):
    logits = z_a @ z_b.t() / temperature
    targets = torch.arange(z_a.size(0))
    return 0.5 * (F.cross_entropy(logits, targets) + F.cross_entropy(logits.t(), targets))


def two_views(x, noise=0.3, drop=0.2):
    def view():
        keep = (torch.rand_like(x) > drop).float()
        return x * keep + noise * torch.randn_like(x)

    return view(), view()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--temperature", type=float, default=0.2)
    args = ap.parse_args()

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(7 + rank)  # different views on each rank

    gen = torch.Generator().manual_seed(7)
    centers = torch.randn(16, IN_DIM, generator=gen)
    data = centers[torch.randint(0, 16, (384,), generator=gen)] + 0.2 * torch.randn(
        384, IN_DIM, generator=gen
    )
    dataset = TensorDataset(data)
    sampler = DistributedSampler(dataset, seed=7)
    loader = DataLoader(dataset, batch_size=args.batch, sampler=sampler, drop_last=True)

    encoder = Encoder()
    model = DistributedDataParallel(encoder)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(
        opt, T_max=args.epochs * len(loader), eta_min=1e-5
    )

    step = 0
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        for (x,) in loader:
            view_a, view_b = two_views(x)
            z_a, z_b = model(view_a, view_b)  # fault siamese_module_embed: z_a, z_b = model.module.embed(view_a), model.module.embed(view_b)
            loss = info_nce(z_a, z_b, args.temperature)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            step += 1

            with torch.no_grad():
                top1 = (z_a @ z_b.t()).argmax(1).eq(torch.arange(z_a.size(0))).float().mean()
                metrics = torch.stack([loss.detach(), top1])
                dist.all_reduce(metrics)
                metrics /= dist.get_world_size()
            if rank == 0:
                print(
                    f"epoch={epoch} step={step} infonce={metrics[0]:.4f} pos_top1={metrics[1]:.3f}"
                )

    del model
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

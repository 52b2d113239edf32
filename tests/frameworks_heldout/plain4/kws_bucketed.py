"""Keyword spotting on variable-length synthetic utterances, length-bucketed batches.

Each utterance is a sequence of 13-d frames (20 to 64 frames) with a class-specific pattern
at a random offset in noise. A ``DistributedSampler`` subclass yields whole batches: it
sorts the indices by length with a random tie-break, cuts them into batches of similar
length, shuffles the batches with a generator seeded by (seed, epoch), and deals every
rank its own slice of them. A padding collate with a frame mask; a dilated conv net with
GroupNorm and a masked mean pool; Adam with the lr scaled from a reference batch by the
square-root rule; StepLR per epoch; all-reduced validation accuracy.

    python -m torch.distributed.run --nproc_per_node 2 kws_bucketed.py
"""

from __future__ import annotations

import argparse
import gc
import math
from collections.abc import Iterator

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset, DistributedSampler

FEATS, CLASSES = 13, 4


class Utterances(Dataset):
    def __init__(self, count: int, seed: int) -> None:
        gen = torch.Generator().manual_seed(seed)
        self.items = []
        for i in range(count):
            label = i % CLASSES
            length = int(torch.randint(20, 65, (1,), generator=gen))
            x = 0.5 * torch.randn(length, FEATS, generator=gen)
            start = int(torch.randint(0, length - 12, (1,), generator=gen))
            t = torch.arange(12, dtype=torch.float32).unsqueeze(1)
            bands = torch.arange(FEATS, dtype=torch.float32).unsqueeze(0)
            x[start : start + 12] += torch.sin(0.5 * (label + 1) * t + 0.3 * bands)
            self.items.append((x, label))

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        return self.items[i]


class BucketBatchSampler(DistributedSampler):
    """Batches of similar length, shuffled per epoch, dealt out to the ranks."""

    def __init__(self, dataset: Utterances, batch_size: int, seed: int) -> None:
        super().__init__(dataset, shuffle=True, seed=seed, drop_last=True)
        self.lengths = torch.tensor([x.shape[0] for x, _ in dataset.items], dtype=torch.float32)
        self.batch_size = batch_size

    def _batches(self) -> list[list[int]]:
        gen = torch.Generator().manual_seed(self.seed + self.epoch)
        jitter = torch.rand(len(self.lengths), generator=gen) * 4.0
        order = torch.argsort(self.lengths + jitter).tolist()
        batches = [
            order[i : i + self.batch_size]
            for i in range(0, len(order) - self.batch_size + 1, self.batch_size)
        ]
        perm = torch.randperm(len(batches), generator=gen).tolist()
        usable = len(batches) - len(batches) % self.num_replicas
        return [batches[p] for p in perm[:usable]]

    def __iter__(self) -> Iterator[list[int]]:  # type: ignore[override]
        batches = self._batches()
        yield from batches[self.rank :: self.num_replicas]  # fault kws_sampler_unsharded: yield from batches

    def __len__(self) -> int:
        return len(self._batches()) // self.num_replicas


def pad_collate(items: list[tuple[torch.Tensor, int]]) -> dict[str, torch.Tensor]:
    longest = max(x.shape[0] for x, _ in items)
    x = torch.zeros(len(items), longest, FEATS)
    mask = torch.zeros(len(items), longest)
    for i, (frames, _) in enumerate(items):
        x[i, : frames.shape[0]] = frames
        mask[i, : frames.shape[0]] = 1.0
    return {"x": x, "mask": mask, "y": torch.tensor([y for _, y in items])}


class Spotter(nn.Module):
    def __init__(self, width: int = 32) -> None:
        super().__init__()
        self.convs = nn.Sequential(
            nn.Conv1d(FEATS, width, 5, padding=2),
            nn.GroupNorm(4, width),
            nn.ReLU(),
            nn.Conv1d(width, width, 3, padding=2, dilation=2),
            nn.GroupNorm(4, width),
            nn.ReLU(),
        )
        self.head = nn.Linear(width, CLASSES)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        h = self.convs(x.transpose(1, 2)) * mask.unsqueeze(1)
        pooled = h.sum(2) / mask.sum(1, keepdim=True)
        return self.head(pooled)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--base-lr", type=float, default=1e-3)
    parser.add_argument("--base-batch", type=int, default=4)
    parser.add_argument("--seed", type=int, default=9)
    args = parser.parse_args()

    dist.init_process_group("gloo")
    rank, world_size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(args.seed)

    train_set, val_set = Utterances(192, args.seed), Utterances(64, args.seed + 1)
    train_sampler = BucketBatchSampler(train_set, args.batch, args.seed)
    train_loader = DataLoader(train_set, batch_sampler=train_sampler, collate_fn=pad_collate)
    val_loader = DataLoader(
        val_set,
        batch_size=args.batch,
        sampler=DistributedSampler(val_set, shuffle=False),
        collate_fn=pad_collate,
    )

    model = DDP(Spotter())
    global_batch = args.batch * world_size
    lr = args.base_lr * math.sqrt(global_batch / args.base_batch)  # fault kws_lr_linear: lr = args.base_lr * global_batch / args.base_batch
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.3)
    if rank == 0:
        print(f"global batch {global_batch} lr {lr:.2e}", flush=True)

    for epoch in range(args.epochs):
        train_sampler.set_epoch(epoch)
        model.train()
        for step, batch in enumerate(train_loader):
            loss = F.cross_entropy(model(batch["x"], batch["mask"]), batch["y"])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            logged = loss.detach().clone()
            dist.all_reduce(logged, op=dist.ReduceOp.AVG)
            if rank == 0 and step % 2 == 0:
                print(f"epoch {epoch} step {step} loss {logged.item():.4f}", flush=True)
        scheduler.step()

        model.eval()
        counts = torch.zeros(2)
        with torch.no_grad():
            for batch in val_loader:
                pred = model(batch["x"], batch["mask"]).argmax(1)
                counts += torch.tensor([float((pred == batch["y"]).sum()), float(len(pred))])
        dist.all_reduce(counts)
        if rank == 0:
            print(f"epoch {epoch} val_acc {counts[0].item() / counts[1].item():.3f}", flush=True)

    del model, optimizer
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

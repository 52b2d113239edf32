"""Tabular regression with categorical embeddings, the DDP model compiled (aot_eager).

Four categorical columns (one embedding table each) and six numeric columns feed a residual
MLP that predicts a synthetic target. The DDP model is compiled with
``torch.compile(backend="aot_eager")``. Two optimizers, each with its own linear-decay
LambdaLR: SGD for the embedding tables, AdamW for the dense part. Two micro-batches per
update, the first under ``no_sync``; the loss is divided by the accumulation steps, the
gradient norm clipped once per update.

    python -m torch.distributed.run --nproc_per_node 2 tabular_compiled.py
"""

from __future__ import annotations

import argparse
import contextlib
import gc

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

CARDINALITIES = (12, 30, 7, 20)
NUMERIC = 6


def table(rows: int, seed: int) -> TensorDataset:
    gen = torch.Generator().manual_seed(seed)
    cats = torch.stack([torch.randint(0, c, (rows,), generator=gen) for c in CARDINALITIES], 1)
    nums = torch.randn(rows, NUMERIC, generator=gen)
    effects = [torch.randn(c, generator=gen) for c in CARDINALITIES]
    target = sum(e[cats[:, j]] for j, e in enumerate(effects))
    noise = 0.1 * torch.randn(rows, generator=gen)
    target = target + nums[:, 0] * 1.5 - nums[:, 1] * nums[:, 2] + noise
    return TensorDataset(cats, nums, target)


class Block(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.ff = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.ff(self.norm(x))


class TabularNet(nn.Module):
    def __init__(self, emb_dim: int = 8, width: int = 64) -> None:
        super().__init__()
        self.embeddings = nn.ModuleList(nn.Embedding(c, emb_dim) for c in CARDINALITIES)
        self.proj = nn.Linear(emb_dim * len(CARDINALITIES) + NUMERIC, width)
        self.blocks = nn.Sequential(Block(width), Block(width))
        self.out = nn.Linear(width, 1)

    def forward(self, cats: torch.Tensor, nums: torch.Tensor) -> torch.Tensor:
        embedded = [emb(cats[:, j]) for j, emb in enumerate(self.embeddings)]
        h = self.proj(torch.cat([*embedded, nums], 1))
        return self.out(self.blocks(h)).squeeze(1)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--micro-batch", type=int, default=32)
    parser.add_argument("--accum", type=int, default=2)
    parser.add_argument("--emb-lr", type=float, default=0.05)
    parser.add_argument("--dense-lr", type=float, default=3e-3)
    parser.add_argument("--clip", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=21)
    args = parser.parse_args()

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(args.seed)

    data = table(768, args.seed)
    sampler = DistributedSampler(data, shuffle=True, seed=args.seed, drop_last=True)
    loader = DataLoader(data, batch_size=args.micro_batch, sampler=sampler, drop_last=True)
    updates_per_epoch = len(loader) // args.accum
    total_updates = args.epochs * updates_per_epoch

    ddp_model = DDP(TabularNet())
    model = torch.compile(ddp_model, backend="aot_eager")
    emb_params = list(ddp_model.module.embeddings.parameters())
    emb_ids = {id(p) for p in emb_params}
    dense_params = [p for p in ddp_model.module.parameters() if id(p) not in emb_ids]
    emb_opt = torch.optim.SGD(emb_params, lr=args.emb_lr, momentum=0.9)
    dense_opt = torch.optim.AdamW(dense_params, lr=args.dense_lr, weight_decay=1e-4)

    def decay(update: int) -> float:
        return max(0.0, 1.0 - update / total_updates)

    optimizers = (emb_opt, dense_opt)
    schedulers = [torch.optim.lr_scheduler.LambdaLR(opt, decay) for opt in optimizers]

    update = 0
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        window = torch.zeros(2)
        for i, (cats, nums, target) in enumerate(loader):
            last_micro = (i + 1) % args.accum == 0
            context = contextlib.nullcontext() if last_micro else ddp_model.no_sync()
            with context:
                loss = F.mse_loss(model(cats, nums), target)
                (loss / args.accum).backward()  # fault tab_clip_in_micro: = || torch.nn.utils.clip_grad_norm_(ddp_model.parameters(), args.clip)
            window += torch.stack([loss.detach() * len(target), torch.tensor(float(len(target)))])  # fault tab_sched_per_micro: = || for sched in schedulers: || >sched.step()
            if not last_micro:
                continue
            torch.nn.utils.clip_grad_norm_(ddp_model.parameters(), args.clip)  # fault tab_clip_in_micro: -
            for opt in optimizers:
                opt.step()
                opt.zero_grad(set_to_none=True)
            for sched in schedulers:  # fault tab_sched_per_micro: -
                sched.step()  # fault tab_sched_per_micro: -
            dist.all_reduce(window)
            if rank == 0 and update % 3 == 0:
                print(
                    f"epoch {epoch} update {update} mse {window[0].item() / window[1].item():.4f} "
                    f"lr {dense_opt.param_groups[0]['lr']:.2e}",
                    flush=True,
                )
            window = torch.zeros(2)
            update += 1

    del model, ddp_model, emb_opt, dense_opt
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

"""Fine-tuning loop with linear warmup/decay and gradient accumulation."""

import argparse
import gc

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.optim.lr_scheduler import LambdaLR
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def get_linear_schedule_with_warmup(optimizer, num_warmup_steps, num_training_steps):
    def lr_lambda(current_step):
        if current_step < num_warmup_steps:
            return float(current_step) / float(max(1, num_warmup_steps))
        return max(0.0, float(num_training_steps - current_step) / float(max(1, num_training_steps - num_warmup_steps)))

    return LambdaLR(optimizer, lr_lambda)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--accum", type=int, default=4)
    ap.add_argument("--warmup-ratio", type=float, default=0.1)
    args = ap.parse_args()

    dist.init_process_group("gloo")
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(14)
    x = torch.randn(512, 24, generator=g)
    y = (x @ torch.randn(24, 3, generator=g)).argmax(1)
    ds = TensorDataset(x, y)
    sampler = DistributedSampler(ds)
    loader = DataLoader(ds, batch_size=8, sampler=sampler)

    model = DDP(nn.Sequential(nn.Linear(24, 48), nn.ReLU(), nn.Dropout(0.1), nn.Linear(48, 3)))
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    total_steps = args.epochs * len(loader) // args.accum
    scheduler = get_linear_schedule_with_warmup(optimizer, int(args.warmup_ratio * total_steps), total_steps)

    completed = 0
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        for step, (xb, yb) in enumerate(loader):
            loss = F.cross_entropy(model(xb), yb) / args.accum
            loss.backward()
            scheduler.step()  # fix: -
            if (step + 1) % args.accum == 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()  # fix: = || scheduler.step()
                optimizer.zero_grad()
                completed += 1
        logged = torch.tensor([loss.item() * args.accum])
        dist.all_reduce(logged)
        if dist.get_rank() == 0:
            print(f"epoch {epoch} steps {completed} lr {scheduler.get_last_lr()[0]:.2e} loss {logged.item() / 2:.4f}")
    del model
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

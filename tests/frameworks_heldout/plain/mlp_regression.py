# MLP regression on a synthetic tabular problem, DDP on CPU (gloo).
# usage: torchrun --nproc_per_node 2 mlp_regression.py [--epochs 2]
import argparse
import gc
import os

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

N_FEATURES = 12


def make_data(n, seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, N_FEATURES)).astype(np.float32)
    w = np.linspace(-1.0, 1.0, N_FEATURES, dtype=np.float32)
    y = np.sin(x @ w) + 0.5 * x[:, 0] * x[:, 1] + 0.1 * rng.normal(size=n).astype(np.float32)
    return TensorDataset(torch.from_numpy(x), torch.from_numpy(y.astype(np.float32)).unsqueeze(1))


class Regressor(nn.Module):
    def __init__(self, hidden=64):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(N_FEATURES, hidden),
            nn.SiLU(),
            nn.Linear(hidden, hidden),
            nn.SiLU(),
            nn.Linear(hidden, 1),
        )

    def forward(self, x):
        return self.net(x)


def evaluate(model, loader):
    model.eval()
    totals = torch.zeros(2)
    with torch.no_grad():
        for x, y in loader:
            totals[0] += nn.functional.mse_loss(model(x), y, reduction="sum")
            totals[1] += y.numel()
    dist.all_reduce(totals)
    model.train()
    return (totals[0] / totals[1]).item()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    dist.init_process_group("gloo")
    rank = int(os.environ["RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    torch.manual_seed(args.seed)

    train_ds = make_data(512, seed=args.seed)
    val_ds = make_data(128, seed=args.seed + 1)
    train_sampler = DistributedSampler(train_ds, shuffle=True, seed=args.seed)  # fault mlp_sampler_seed: train_sampler = DistributedSampler(train_ds, shuffle=True, seed=args.seed + rank)
    train_loader = DataLoader(train_ds, batch_size=args.batch_size, sampler=train_sampler)  # fault mlp_shuffle_loader: train_loader = DataLoader(train_ds, batch_size=args.batch_size, shuffle=True)
    val_loader = DataLoader(
        val_ds, batch_size=64, sampler=DistributedSampler(val_ds, shuffle=False)
    )

    model = DDP(Regressor())
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    loss_fn = nn.MSELoss()

    step = 0
    for epoch in range(args.epochs):
        train_sampler.set_epoch(epoch)  # fault mlp_shuffle_loader: -
        for x, y in train_loader:
            optimizer.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()
            step += 1

            avg_loss = loss.detach().clone()
            dist.all_reduce(avg_loss, op=dist.ReduceOp.SUM)
            avg_loss /= world_size  # fault mlp_metric_sum: -
            if rank == 0 and step % 2 == 0:
                print(f"[epoch {epoch}] step {step} train_mse {avg_loss.item():.4f}")
        scheduler.step()
        val_mse = evaluate(model, val_loader)
        if rank == 0:
            print(f"[epoch {epoch}] val_mse {val_mse:.4f} lr {scheduler.get_last_lr()[0]:.1e}")

    del model
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

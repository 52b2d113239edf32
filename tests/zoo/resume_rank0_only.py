"""Warm-start fine-tuning from a checkpoint of an earlier run."""

import argparse
import gc
import os
import tempfile

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def make_model():
    return nn.Sequential(nn.Linear(10, 40), nn.ReLU(), nn.Linear(40, 40), nn.ReLU(), nn.Linear(40, 2))


def checkpoint_path():
    run_id = os.environ.get("TORCHELASTIC_RUN_ID", "local")
    return os.path.join(tempfile.gettempdir(), f"warmstart-{run_id}.pt")


def write_pretrained(path):
    torch.manual_seed(123)
    torch.save({"model": make_model().state_dict(), "step": 1000}, path)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--lr", type=float, default=1e-3)
    args = parser.parse_args()

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    path = checkpoint_path()
    if rank == 0:
        write_pretrained(path)
    dist.barrier()

    torch.manual_seed(0)
    model = DistributedDataParallel(make_model())  # fix: net = make_model() || state = torch.load(path) || net.load_state_dict(state["model"])
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)  # fix: -
    if rank == 0:
        state = torch.load(path)  # fix: -
        model.module.load_state_dict(state["model"])  # fix: -
        print(f"resumed from step {state['step']}")  # fix: = || <model = DistributedDataParallel(net) || <optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)

    g = torch.Generator().manual_seed(2)
    x = torch.randn(320, 10, generator=g)
    y = (x[:, 0] * x[:, 1] > 0).long()
    ds = TensorDataset(x, y)
    sampler = DistributedSampler(ds)
    loader = DataLoader(ds, batch_size=16, sampler=sampler)
    criterion = nn.CrossEntropyLoss()
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            optimizer.zero_grad()
            loss = criterion(model(xb), yb)
            loss.backward()
            optimizer.step()
        avg = loss.detach().clone()
        dist.all_reduce(avg)
        if rank == 0:
            print(f"epoch {epoch} loss {avg.item() / dist.get_world_size():.4f}")

    dist.barrier()
    if rank == 0:
        os.remove(path)
    del model
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

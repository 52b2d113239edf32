"""A small regression MLP under DDP with ZeRO-1: ZeroRedundancyOptimizer shards the AdamW
state across ranks; every rank keeps the full model."""

import argparse
import gc  # fault zero1_rank0_init: = || import os || import tempfile

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def build_model():
    return nn.Sequential(
        nn.Linear(16, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 1)
    )


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--lr", type=float, default=3e-3)
    args = parser.parse_args()

    dist.init_process_group("gloo")
    rank = dist.get_rank()  # fault zero1_rank0_init: = || init_from = os.path.join(tempfile.gettempdir(), f"mlp-{os.environ.get('TORCHELASTIC_RUN_ID', 'local')}.pt") || if rank == 0: || >torch.manual_seed(99) || >torch.save(build_model().state_dict(), init_from) || dist.barrier()
    torch.manual_seed(0)
    model = DDP(build_model())
    optimizer = ZeroRedundancyOptimizer(
        model.parameters(), optimizer_class=torch.optim.AdamW, lr=args.lr
    )

    g = torch.Generator().manual_seed(7)  # fault zero1_rank0_init: if rank == 0: || >model.module.load_state_dict(torch.load(init_from)) || >print(f"initialised from {init_from}") || =
    x = torch.randn(512, 16, generator=g)
    y = x[:, :4].sum(dim=1, keepdim=True) + 0.1 * torch.randn(512, 1, generator=g)
    dataset = TensorDataset(x, y)
    sampler = DistributedSampler(dataset, shuffle=True)
    loader = DataLoader(dataset, batch_size=32, sampler=sampler)
    loss_fn = nn.MSELoss()

    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        total = torch.zeros(2)
        for xb, yb in loader:
            optimizer.zero_grad()
            loss = loss_fn(model(xb), yb)
            loss.backward()
            optimizer.step()
            total += torch.tensor([loss.item() * len(xb), len(xb)])
        dist.all_reduce(total)
        if rank == 0:
            print(f"epoch {epoch}: loss {total[0] / total[1]:.4f}")

    optimizer.consolidate_state_dict(to=0)
    if rank == 0:
        state = optimizer.state_dict()
        print(f"consolidated optimizer state for {len(state['state'])} tensors")  # fault zero1_rank0_init: = || os.remove(init_from)
    del model, optimizer
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

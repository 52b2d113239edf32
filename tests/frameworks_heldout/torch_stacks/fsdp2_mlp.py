"""FSDP2 (fully_shard) on a residual MLP; per-block sharding, sharded clipping, 2 gloo ranks."""

import gc
import os

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.fsdp import fully_shard
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


class ResBlock(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.ff = nn.Sequential(nn.Linear(d, 2 * d), nn.SiLU(), nn.Linear(2 * d, d))

    def forward(self, x):
        return x + self.ff(self.norm(x))


class Net(nn.Module):
    def __init__(self, d_in=8, d=32, depth=3, d_out=1):
        super().__init__()
        self.inp = nn.Linear(d_in, d)
        self.blocks = nn.ModuleList(ResBlock(d) for _ in range(depth))
        self.out = nn.Linear(d, d_out)

    def forward(self, x):
        x = self.inp(x)
        for b in self.blocks:
            x = b(x)
        return self.out(x)


def main():
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = Net()
    for block in model.blocks:
        fully_shard(block)
    fully_shard(model)

    g = torch.Generator().manual_seed(4)
    x = torch.randn(256, 8, generator=g)
    y = (x[:, :4].sum(1) - x[:, 4:].prod(1)).unsqueeze(1)
    ds = TensorDataset(x, y)
    sampler = DistributedSampler(ds, num_replicas=world, rank=rank, shuffle=True, seed=0)
    loader = DataLoader(ds, batch_size=16, sampler=sampler, drop_last=True)

    optim = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.01)
    steps = int(os.environ.get("FSDP_STEPS", "6"))
    step = 0
    epoch = 0
    while step < steps:
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            loss = nn.functional.mse_loss(model(xb), yb)
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
            optim.step()
            optim.zero_grad()
            step += 1
            if rank == 0:
                print(
                    f"step {step} loss {loss.item():.4f} grad_norm {norm.full_tensor().item():.3f}"
                )
            if step == steps:
                break
        epoch += 1

    del model, optim
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

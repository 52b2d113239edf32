"""MLP with gradient accumulation; skips redundant all-reduces with no_sync."""

import gc
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

ACCUM_STEPS = 4
MICRO_BATCH = 8
EPOCHS = 2


def build_data():
    g = torch.Generator().manual_seed(3)
    x = torch.randn(512, 16, generator=g)
    y = torch.sin(x[:, :4]).sum(1, keepdim=True) + 0.05 * torch.randn(512, 1, generator=g)
    return TensorDataset(x, y)


def main():
    dist.init_process_group("gloo")
    rank = int(os.environ["RANK"])
    torch.manual_seed(0)
    data = build_data()
    sampler = DistributedSampler(data, shuffle=True, drop_last=True)
    loader = DataLoader(data, batch_size=MICRO_BATCH, sampler=sampler, drop_last=True)

    model = DDP(nn.Sequential(nn.Linear(16, 64), nn.SiLU(), nn.Linear(64, 64), nn.SiLU(), nn.Linear(64, 1)))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.SmoothL1Loss()

    step = 0
    for epoch in range(EPOCHS):
        sampler.set_epoch(epoch)
        batches = iter(loader)
        while True:
            chunk = [b for _, b in zip(range(ACCUM_STEPS), batches)]
            if len(chunk) < ACCUM_STEPS:
                break
            with model.no_sync():
                for x, y in chunk:  # fix: for x, y in chunk[:-1]:
                    loss = loss_fn(model(x), y) / ACCUM_STEPS
                    loss.backward()  # fix: = || <<x, y = chunk[-1] || <<loss = loss_fn(model(x), y) / ACCUM_STEPS || <<loss.backward()
            opt.step()
            opt.zero_grad()
            step += 1
            if step % 5 == 0:
                reduced = loss.detach() * ACCUM_STEPS
                dist.all_reduce(reduced)
                if rank == 0:
                    print(f"step {step} loss {reduced.item() / dist.get_world_size():.4f}")

    del model
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

"""Small-batch fine-tuning of an MLP; prints progress from the main process."""

import gc

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    is_main = rank == 0
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(19)
    x = torch.randn(256, 16, generator=g)
    y = (x[:, 0] - x[:, 1] > 0).long()
    ds = TensorDataset(x, y)
    sampler = DistributedSampler(ds)
    loader = DataLoader(ds, batch_size=4, sampler=sampler)
    model = DDP(nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 2)))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    step = 0
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            opt.zero_grad()
            loss = F.cross_entropy(model(xb), yb)
            loss.backward()
            opt.step()
            step += 1
            if is_main and step % 8 == 0:  # fix: if step % 8 == 0: || >mean_loss = loss.detach().clone() || >dist.all_reduce(mean_loss) || >mean_loss /= dist.get_world_size() || >if is_main:
                print(f"step {step:4d} | loss {loss.item():.4f}")  # fix: >print(f"step {step:4d} | loss {mean_loss.item():.4f}")
    del model
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

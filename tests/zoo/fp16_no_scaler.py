"""Mixed-precision training of an MLP classifier with autocast."""

import gc
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

DEVICE = "cpu"
AMP_DTYPE = torch.float16


def main():
    dist.init_process_group("gloo")
    rank = int(os.environ["RANK"])
    torch.manual_seed(10)
    g = torch.Generator().manual_seed(16)
    x = torch.randn(384, 32, generator=g)
    y = (x[:, :8].sum(1) > 0).long()
    ds = TensorDataset(x, y)
    sampler = DistributedSampler(ds)
    loader = DataLoader(ds, batch_size=16, sampler=sampler)
    model = DDP(nn.Sequential(nn.Linear(32, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 2)))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    criterion = nn.CrossEntropyLoss()  # fix: = || scaler = torch.amp.GradScaler(DEVICE)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            optimizer.zero_grad(set_to_none=True)
            with torch.autocast(device_type=DEVICE, dtype=AMP_DTYPE):
                logits = model(xb)
                loss = criterion(logits.float(), yb)
            loss.backward()  # fix: scaler.scale(loss).backward()
            optimizer.step()  # fix: scaler.step(optimizer) || scaler.update()
        val = loss.detach()
        dist.all_reduce(val)
        if rank == 0:
            print(f"epoch {epoch}: loss {val.item() / 2:.4f}")
    del model
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

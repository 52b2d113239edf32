"""Logit distillation of a small MLP student from a wider teacher restored from a checkpoint;
softened targets at temperature 2, KL loss, Adam."""

import gc
import os
import tempfile

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def mlp(hidden):
    return nn.Sequential(nn.Linear(10, hidden), nn.ReLU(), nn.Linear(hidden, 3))


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    run = os.environ.get("MASTER_PORT", "local")
    path = os.path.join(tempfile.gettempdir(), f"zoo-teacher-{run}.pt")
    if rank == 0:
        torch.manual_seed(42)
        torch.save(mlp(64).state_dict(), path)
    dist.barrier()
    teacher = mlp(64)
    if rank == 0:  # fix: if True:
        teacher.load_state_dict(torch.load(path))
    teacher.eval()
    torch.manual_seed(0)
    student = DDP(mlp(16))
    opt = torch.optim.Adam(student.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(1)
    ds = TensorDataset(torch.randn(256, 10, generator=g))
    sampler = DistributedSampler(ds)
    loader = DataLoader(ds, batch_size=16, sampler=sampler)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for (xb,) in loader:
            with torch.no_grad():
                soft = F.softmax(teacher(xb) / 2.0, dim=-1)
            loss = F.kl_div(F.log_softmax(student(xb) / 2.0, dim=-1), soft, reduction="batchmean")
            opt.zero_grad()
            loss.backward()
            opt.step()
    dist.barrier()
    if rank == 0:
        os.remove(path)
    del student
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

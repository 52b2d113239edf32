"""Two phases in one job: a teacher MLP trained under DDP with Adam and checkpointed by rank 0,
then a smaller student distilled from it (temperature 2, KL + CE) with SGD and momentum."""

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
    return nn.Sequential(nn.Linear(8, hidden), nn.ReLU(), nn.Linear(hidden, 3))


def batches(ds, sampler, epochs, size):
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        yield from DataLoader(ds, batch_size=size, sampler=sampler)


def train_teacher(ds, path):
    net = mlp(48)
    model = DDP(net)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    for xb, yb in batches(ds, DistributedSampler(ds, seed=0), 1, 32):
        loss = F.cross_entropy(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
    if dist.get_rank() == 0:
        torch.save(net.state_dict(), path)
    dist.barrier()
    del model
    gc.collect()


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(384, 8, generator=g)
    ds = TensorDataset(x, (x[:, 0] > 0).long() + (x[:, 1] > 0).long())
    run = os.environ.get("MASTER_PORT", "local")
    path = os.path.join(tempfile.gettempdir(), f"zoo-kd-teacher-{run}.pt")
    train_teacher(ds, path)
    teacher = mlp(48)
    if rank == 0:  # fix: if True:
        teacher.load_state_dict(torch.load(path))
    teacher.eval()
    student = DDP(mlp(12))
    opt = torch.optim.SGD(student.parameters(), lr=0.05, momentum=0.9)
    for xb, yb in batches(ds, DistributedSampler(ds, seed=0), 2, 16):
        with torch.no_grad():
            soft = F.softmax(teacher(xb) / 2.0, dim=1)
        logits = student(xb)
        kd = F.kl_div(F.log_softmax(logits / 2.0, dim=1), soft, reduction="batchmean") * 4.0
        loss = 0.5 * kd + 0.5 * F.cross_entropy(logits, yb)
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

"""Two-tower recommender with a custom DDP communication hook for gradient all-reduce."""

import gc

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def allreduce_hook(process_group, bucket):
    group = process_group if process_group is not None else dist.group.WORLD
    fut = dist.all_reduce(bucket.buffer(), group=group, async_op=True).get_future()  # fix: tensor = bucket.buffer().div_(group.size()) || fut = dist.all_reduce(tensor, group=group, async_op=True).get_future()
    return fut.then(lambda f: f.value()[0])


class TwoTower(nn.Module):
    def __init__(self, users=100, items=80, dim=16):
        super().__init__()
        self.user = nn.Embedding(users, dim)
        self.item = nn.Embedding(items, dim)
        self.bias = nn.Parameter(torch.zeros(1))

    def forward(self, u, i):
        return (self.user(u) * self.item(i)).sum(-1) + self.bias


def main():
    dist.init_process_group("gloo")
    torch.manual_seed(6)
    g = torch.Generator().manual_seed(40)
    u = torch.randint(0, 100, (480,), generator=g)
    i = torch.randint(0, 80, (480,), generator=g)
    r = ((u % 7) == (i % 7)).float()
    ds = TensorDataset(u, i, r)
    sampler = DistributedSampler(ds)
    loader = DataLoader(ds, batch_size=24, sampler=sampler)
    model = DDP(TwoTower())
    model.register_comm_hook(None, allreduce_hook)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    for epoch in range(3):
        sampler.set_epoch(epoch)
        for ub, ib, rb in loader:
            loss = F.binary_cross_entropy_with_logits(model(ub, ib), rb)
            opt.zero_grad()
            loss.backward()
            opt.step()
        val = loss.detach()
        dist.all_reduce(val)
        if dist.get_rank() == 0:
            print(f"epoch {epoch} loss {val.item() / dist.get_world_size():.4f}")
    del model
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

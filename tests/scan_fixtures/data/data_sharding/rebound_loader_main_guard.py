"""The rebinding sits under ``if __name__ == "__main__"``: that branch always runs when the
script is launched, so the plain loader replaces the sharded one and decides the fact."""
# scan-facts: uses_distributed_sampler=false
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

from _toy import ToyDataset, ToyNet


def get_loader(ds):
    return DataLoader(ds, batch_size=16, sampler=DistributedSampler(ds))


def plain_loader(ds):
    return DataLoader(ds, batch_size=16, shuffle=True)  # expect: no-distributed-sampler


def train(make_loader):
    dist.init_process_group("gloo")
    loader = make_loader(ToyDataset(512))
    model = DDP(ToyNet())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for batch in loader:
        loss = model(batch["x"]).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad()


if __name__ == "__main__":
    get_loader = plain_loader
    train(get_loader)

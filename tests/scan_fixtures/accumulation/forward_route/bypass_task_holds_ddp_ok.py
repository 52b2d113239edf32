"""A task module holds the DDP-wrapped model and calls it in its own forward: calling the task
goes through DDP (the wrap reads self.net, so the task itself looks wrapped)."""
# scan-facts: forward_bypasses_ddp=false
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler

from _toy import ToyDataset, ToyNet


class RegressionTask(nn.Module):
    def __init__(self, net):
        super().__init__()
        self.net = net

    def wrap_ddp(self, device):
        self.net = DDP(self.net, device_ids=[device])

    def forward(self, batch):
        pred = self.net(batch["x"])
        return (pred - batch["x"]).square().mean()


def main():
    dist.init_process_group("nccl")
    task = RegressionTask(ToyNet().cuda())
    task.wrap_ddp(0)
    ds = ToyDataset(256)
    sampler = DistributedSampler(ds)
    loader = DataLoader(ds, batch_size=8, sampler=sampler)
    opt = torch.optim.AdamW(task.parameters(), lr=1e-4)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for batch in loader:
            loss = task(batch)  # ok: ddp-wrapper-bypassed
            loss.backward()
            opt.step()
            opt.zero_grad()


main()
